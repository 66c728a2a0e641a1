#pragma once
// One training step: normalize + augment, forward, softmax cross-entropy, backward, the
// optimizer update and the refresh of the bf16 weight copies. The trainer and `convoy bench`
// both run this one, so the benchmark times exactly the step that training runs.
#include <cstdint>

#include "engine/backends/backend.h"
#include "engine/config/run_config.h"
#include "engine/core/tensor.h"
#include "engine/graph/model.h"
#include "engine/optim/optimizer.h"

namespace convoy {

// What stays the same from one step of a run to the next.
struct TrainRecipe {
  OptimizerConfig optimizer;
  NormalizeAugment augment;    // normalization and the training augmentation (crop, flip)
  double label_smoothing = 0;
  uint64_t seed = 0;  // the run's seed: step s draws its augmentation and dropout from (seed, s)
};

// A step's results stay on the device: reading one waits for the device, so a loop reads
// them now and then, not every step.
struct TrainStepOutput {
  Tensor loss;  // (1) f32: the batch's mean cross-entropy, label smoothing included
  Tensor hits;  // (1) i32: samples whose top-1 class is their label
};

// The state a step carries over: the model (the caller's) and the optimizer with its
// momentum buffers or moments (this object's).
class TrainStep {
 public:
  // `model` is already on `backend` (Model::to) in its compute dtype and layout.
  TrainStep(Backend& backend, Model& model, const TrainRecipe& recipe);

  // One step on a batch already on the device: images (N, C, H, W) u8, labels (N) i32.
  // `step` counts the run's optimizer steps from 0; it seeds augmentation and dropout, so a
  // resumed run draws what the uninterrupted one would have. `lr`: this step's rate.
  TrainStepOutput run(const Tensor& images, const Tensor& labels, int64_t step, double lr);

  // run() in two halves, for a caller that looks at the loss before it lets the step update
  // the weights (nan_policy: skip_step): forward() computes the loss and its gradient and keeps
  // them; update() runs the backward pass and the optimizer from them. A step whose update is
  // never called changes no weight (batch norm's running statistics still moved in forward()).
  TrainStepOutput forward(const Tensor& images, const Tensor& labels, int64_t step);
  void update(double lr);

  Optimizer& optimizer() { return optimizer_; }

 private:
  Backend& backend_;
  Model& model_;
  TrainRecipe recipe_;
  Optimizer optimizer_;
  Tensor dlogits_;  // forward()'s, for update()
};

}  // namespace convoy
