#include "engine/train/train_step.h"

#include "engine/core/counter_rng.h"

namespace convoy {

TrainStep::TrainStep(Backend& backend, Model& model, const TrainRecipe& recipe)
    : backend_(backend), model_(model), recipe_(recipe),
      optimizer_(recipe.optimizer, model.parameters(), backend) {}

TrainStepOutput TrainStep::run(const Tensor& images, const Tensor& labels, int64_t step, double lr) {
  TrainStepOutput out = forward(images, labels, step);
  update(lr);
  return out;
}

TrainStepOutput TrainStep::forward(const Tensor& images, const Tensor& labels, int64_t step) {
  const uint64_t step_seed = counter_hash(recipe_.seed, static_cast<uint64_t>(step));
  Ops& ops = backend_.ops();
  Tensor x = backend_.empty(images.shape(), model_.compute_dtype(), model_.layout());  // (N, C, H, W)
  ops.normalize_augment(images, recipe_.augment, step_seed, x);
  const Tensor logits = model_.forward(backend_, x, StepInfo{true, step_seed});  // (N, classes)
  TrainStepOutput out{backend_.empty({1}, DType::f32), backend_.empty({1}, DType::i32)};
  dlogits_ = backend_.empty(logits.shape(), logits.dtype());  // (N, classes)
  ops.softmax_cross_entropy(logits, labels, static_cast<float>(recipe_.label_smoothing), out.loss, dlogits_,
                            out.hits);
  return out;
}

void TrainStep::update(double lr) {
  model_.backward(backend_, dlogits_);  // into the f32 grads (casts from bf16 ones included)
  dlogits_ = Tensor();
  optimizer_.step(backend_, lr);
  // The masters moved: the bf16 (or channels-last) copies the next forward reads must follow.
  model_.refresh_compute_weights(backend_);
}

}  // namespace convoy
