#pragma once
// Optimizers (SGD with momentum/Nesterov/weight decay, AdamW) over a model's parameters,
// with their state kept on the parameters' device, and the learning-rate schedules.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/config/run_config.h"
#include "engine/backends/backend.h"
#include "engine/core/named_tensor.h"
#include "engine/layers/layer.h"

namespace convoy {

class Optimizer {
 public:
  Optimizer(const OptimizerConfig& config, std::vector<std::pair<std::string, Parameter*>> params,
            Backend& backend);
  // One update of every parameter from its `grad`, with learning rate `lr`; with
  // `grad_stats` ((2) f32 on the device), the gradients' non-finite count and sum of squares
  // are added to it in the same pass (the update's grad_stats).
  void step(Backend& backend, double lr, Tensor* grad_stats = nullptr);
  // The same statistics alone: no parameter, state or step count changes.
  void check_gradients(Backend& backend, Tensor& grad_stats);
  int64_t steps() const { return steps_; }
  // The step count alone (a data-parallel rank whose state comes from rank 0's broadcast).
  void set_steps(int64_t steps) { steps_ = steps; }

  // Momentum buffers (SGD) or moments (AdamW), named "optim.<param>.<slot>".
  std::vector<NamedTensor> state();
  void load_state(const std::vector<NamedTensor>& tensors, int64_t steps, const std::string& source);

 private:
  OptimizerConfig config_;
  std::vector<std::pair<std::string, Parameter*>> params_;
  std::vector<Tensor> first_;   // momentum buffer or m, per parameter
  std::vector<Tensor> second_;  // v (AdamW only)
  int64_t steps_ = 0;

  void update(Backend& backend, double lr, Tensor* grad_stats, bool apply);
};

// The learning rate at optimizer step `step` (0-based) of a run of `total_steps`, with
// `steps_per_epoch` steps per epoch. Linear warm-up, then the schedule (PyTorch's
// formulas: StepLR at epoch milestones, CosineAnnealingLR to min_lr, OneCycleLR cosine).
double scheduled_lr(const ScheduleConfig& schedule, double base_lr, int64_t step,
                    int64_t steps_per_epoch, int64_t total_steps);

}  // namespace convoy
