#pragma once
// One training step: normalize + augment, forward, softmax cross-entropy, backward, the
// optimizer update and the refresh of the bf16 weight copies. The trainer and `convoy bench`
// both run this one, so the benchmark times exactly the step that training runs.
#include <cstdint>
#include <memory>

#include "engine/backends/backend.h"
#include "engine/config/run_config.h"
#include "engine/core/tensor.h"
#include "engine/distributed/communicator.h"
#include "engine/distributed/gradient_buckets.h"
#include "engine/graph/model.h"
#include "engine/optim/optimizer.h"

namespace convoy {

// What stays the same from one step of a run to the next.
struct TrainRecipe {
  OptimizerConfig optimizer;
  NormalizeAugment augment;    // normalization and the training augmentation (crop, flip)
  double label_smoothing = 0;
  uint64_t seed = 0;  // the run's seed: step s draws its augmentation and dropout from (seed, s)
  bool sync_batchnorm = false;  // data-parallel: batch statistics over every rank's batch
};

// A step's results stay on the device: reading one waits for the device, so a loop reads
// them now and then, not every step.
struct TrainStepOutput {
  Tensor loss;  // (1) f32: the batch's mean cross-entropy, label smoothing included
  Tensor hits;  // (1) i32: samples whose top-1 class is their label
  // (2) f32: the step's gradients (after any averaging over ranks), [0] their non-finite
  // elements, [1] the sum of squares of the finite ones; filled by the optimizer's pass.
  Tensor grad_stats;
};

// The state a step carries over: the model (the caller's) and the optimizer with its
// momentum buffers or moments (this object's).
class TrainStep {
 public:
  // `model` is already on `backend` (Model::to) in its compute dtype and layout. With a
  // communicator of several ranks the step is data-parallel: gradients are averaged over the
  // ranks in buckets during backward, each rank draws its own augmentation, and run() returns
  // the loss and hits of the global batch.
  TrainStep(Backend& backend, Model& model, const TrainRecipe& recipe, Communicator* comm = nullptr,
            int64_t bucket_bytes = kDefaultBucketBytes);

  // One step on a batch already on the device: images (N, C, H, W) u8, labels (N) i32.
  // `step` counts the run's optimizer steps from 0; it seeds augmentation and dropout, so a
  // resumed run draws what the uninterrupted one would have. `lr`: this step's rate.
  // Where the backend records device work (CUDA graphs), a batch shape met twice in a row has
  // its forward, loss and backward recorded once and replayed from then on: one launch instead
  // of one per op (a ResNet-50 step is ~1,500), so the GPU never waits for the launching thread
  // (which data loading threads compete with). Normalization, augmentation and the optimizer run
  // op by op around the replay: they take this step's seed and rate. Not recorded: several ranks
  // (their collectives), dropout (a draw per step), an observed model (`bench --profile`), or
  // after set_recording(false) (EngineOptions::cuda_graphs off).
  TrainStepOutput run(const Tensor& images, const Tensor& labels, int64_t step, double lr);

  // Ahead of a run's first step (and of its clock), on a GPU: one step's work on a batch of
  // zeros of `batch_size` model inputs, op by op (it makes the convolution plans, sizes the
  // scratch buffers and loads the kernels: ~0.3 s for fmnet on an H200, a fifth of its whole
  // training), then the recording run() would otherwise make at its second step. Nothing a
  // step carries over moves: batch norm's running statistics are put back, the gradients
  // zeroed, and no update is made. False, doing nothing, on the CPU (its steps have nothing to
  // make ahead) and with several ranks (the step's collectives).
  bool prepare(int64_t batch_size);

  // run() in parts, for a caller that looks at the loss and the gradients before it lets the
  // step update the weights (nan_policy: skip_step): forward() computes the loss and its
  // gradient and keeps them; backward() the parameters' gradients (averaged over the ranks);
  // check_gradients() their statistics into out.grad_stats without an update; apply() the
  // optimizer. A step whose apply() is never called changes no weight (batch norm's running
  // statistics still moved in forward()).
  TrainStepOutput forward(const Tensor& images, const Tensor& labels, int64_t step);
  void backward();
  void check_gradients(TrainStepOutput& out);
  void apply(double lr, Tensor* grad_stats = nullptr);
  // Data-parallel: forward()'s loss averaged and hits summed over the ranks (launched now;
  // `wait`: reads of them queued from now on see the result, else the next update() does).
  void share(TrainStepOutput& out, bool wait);
  // Data-parallel: every rank takes rank 0's weights, buffers and optimizer state (as DDP does
  // at its start), so no rank can start from other values.
  void sync_from_rank0();

  Optimizer& optimizer() { return optimizer_; }
  const GradientReducer* reducer() const { return reducer_.get(); }

  // Turns run()'s recording off (or back on); a recording made is dropped.
  void set_recording(bool on);
  // Lets the recording and the memory it replays into go (evaluation between epochs needs that
  // memory); the next step records anew.
  void drop_recording() { recording_.reset(); }
  // Recordings made so far (tests: one per shape, a new one only when a recording went stale).
  int recordings() const { return recordings_; }
  // Whether the last run() replayed a recording.
  bool last_run_replayed() const { return replayed_; }

 private:
  Backend& backend_;
  Model& model_;
  TrainRecipe recipe_;
  Optimizer optimizer_;
  Communicator* comm_ = nullptr;             // several ranks only
  std::unique_ptr<GradientReducer> reducer_;  // likewise
  std::unique_ptr<BatchStatsSync> sync_bn_;   // sync_batchnorm over several ranks
  Tensor dlogits_;  // forward()'s, for update()

  // A recorded forward + loss + backward for one batch shape: it reads `x` (normalized) and
  // `labels`, writes `loss`, `hits` and the parameters' gradients.
  struct Recording {
    Shape shape;  // of the u8 image batch
    Tensor x, labels, loss, hits;
    std::unique_ptr<RecordedWork> work;
    std::vector<const void*> storage;  // Model::storage() when recorded
  };
  bool replay(const Tensor& images, const Tensor& labels, int64_t step, TrainStepOutput& out);
  bool may_record() const;
  uint64_t step_seed(int64_t step) const;
  std::unique_ptr<Recording> recording_;
  Shape last_eager_shape_;  // the batch shape of the last step run op by op
  bool record_ = true;      // set_recording
  bool unsupported_ = false;  // the backend cannot record (the CPU), or recording failed once
  int recordings_ = 0;
  bool replayed_ = false;
};

}  // namespace convoy
