#include "engine/train/train_step.h"

#include "engine/core/counter_rng.h"

namespace convoy {

namespace {
// Batch-norm sums over the ranks, through the communicator (blocking: the layer needs them now).
class CommStatsSync final : public BatchStatsSync {
 public:
  CommStatsSync(Communicator& comm, Backend& backend) : comm_(comm), backend_(backend) {}
  int ranks() const override { return comm_.world_size(); }
  std::vector<double> sum(const std::vector<double>& values) override {
    std::vector<float> f(values.begin(), values.end());
    Tensor t = backend_.upload(Tensor::from_floats(f, {static_cast<int64_t>(f.size())}));  // (values) f32
    if (t.device().is_cpu()) t = t.clone();
    Tensor one[] = {t};
    comm_.all_reduce(one, ReduceOp::sum);
    comm_.wait();
    const std::vector<float> out = t.to_floats();
    return std::vector<double>(out.begin(), out.end());
  }

 private:
  Communicator& comm_;
  Backend& backend_;
};

std::vector<Parameter*> parameter_list(Model& model) {
  std::vector<Parameter*> out;
  for (auto& [name, p] : model.parameters()) out.push_back(p);
  return out;
}
}  // namespace

TrainStep::TrainStep(Backend& backend, Model& model, const TrainRecipe& recipe, Communicator* comm,
                     int64_t bucket_bytes)
    : backend_(backend), model_(model), recipe_(recipe),
      optimizer_(recipe.optimizer, model.parameters(), backend) {
  if (comm && comm->world_size() > 1) {
    comm_ = comm;
    reducer_ = std::make_unique<GradientReducer>(*comm, backend, parameter_list(model), bucket_bytes);
    if (recipe.sync_batchnorm) sync_bn_ = std::make_unique<CommStatsSync>(*comm, backend);
  }
}

TrainStepOutput TrainStep::run(const Tensor& images, const Tensor& labels, int64_t step, double lr) {
  TrainStepOutput out = forward(images, labels, step);
  share(out, /*wait=*/false);  // goes out before the gradients; backward() waits for all
  backward();
  apply(lr, &out.grad_stats);  // the gradient check folded into the update's one pass
  return out;
}

TrainStepOutput TrainStep::forward(const Tensor& images, const Tensor& labels, int64_t step) {
  uint64_t step_seed = counter_hash(recipe_.seed, static_cast<uint64_t>(step));
  // Each rank its own crops, flips and dropout masks, as each GPU of a DDP job draws its own.
  if (comm_ && comm_->rank() > 0) step_seed = counter_hash(step_seed, static_cast<uint64_t>(comm_->rank()));
  Ops& ops = backend_.ops();
  Tensor x = backend_.empty(images.shape(), model_.compute_dtype(), model_.layout());  // (N, C, H, W)
  ops.normalize_augment(images, recipe_.augment, step_seed, x);
  const Tensor logits = model_.forward(backend_, x, StepInfo{true, step_seed, sync_bn_.get()});  // (N, classes)
  TrainStepOutput out{backend_.empty({1}, DType::f32), backend_.empty({1}, DType::i32),
                      backend_.zeros({2}, DType::f32)};
  dlogits_ = backend_.empty(logits.shape(), logits.dtype());  // (N, classes)
  ops.softmax_cross_entropy(logits, labels, static_cast<float>(recipe_.label_smoothing), out.loss, dlogits_,
                            out.hits);
  return out;
}

void TrainStep::share(TrainStepOutput& out, bool wait) {
  if (!comm_) return;
  Tensor loss[] = {out.loss};
  Tensor hits[] = {out.hits};
  comm_->all_reduce(loss, ReduceOp::avg);
  comm_->all_reduce(hits, ReduceOp::sum);
  if (wait) comm_->wait();
}

void TrainStep::backward() {
  if (reducer_) {
    model_.backward(backend_, dlogits_, [this](std::span<Parameter* const> params) { reducer_->grads_ready(params); });
    reducer_->finish();  // the optimizer's reads wait for the averaged gradients
  } else {
    model_.backward(backend_, dlogits_);  // into the f32 grads (casts from bf16 ones included)
  }
  dlogits_ = Tensor();
}

void TrainStep::check_gradients(TrainStepOutput& out) { optimizer_.check_gradients(backend_, out.grad_stats); }

void TrainStep::apply(double lr, Tensor* grad_stats) {
  optimizer_.step(backend_, lr, grad_stats);
  // The masters moved: the bf16 (or channels-last) copies the next forward reads must follow.
  model_.refresh_compute_weights(backend_);
}

void TrainStep::sync_from_rank0() {
  if (!comm_) return;
  for (NamedTensor& t : model_.state()) comm_->broadcast(t.tensor, 0);
  for (NamedTensor& t : optimizer_.state()) comm_->broadcast(t.tensor, 0);
  comm_->wait();
  model_.refresh_compute_weights(backend_);
}

}  // namespace convoy
