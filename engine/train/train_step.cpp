#include "engine/train/train_step.h"

#include <iostream>

#include "engine/core/counter_rng.h"
#include "engine/core/error.h"

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
  TrainStepOutput out;
  if (!replay(images, labels, step, out)) {
    out = forward(images, labels, step);
    share(out, /*wait=*/false);  // goes out before the gradients; backward() waits for all
    backward();
  }
  apply(lr, &out.grad_stats);  // the gradient check folded into the update's one pass
  return out;
}

bool TrainStep::prepare(int64_t batch_size) {
  if (backend_.device().is_cpu() || comm_) return false;
  Shape shape{batch_size};
  for (int64_t d : model_.input_shape()) shape.push_back(d);
  const Tensor images = backend_.zeros(shape, DType::u8);        // (N, C, H, W)
  const Tensor labels = backend_.zeros({batch_size}, DType::i32);  // (N)
  std::vector<Tensor> kept;  // parameters and running statistics, as they were
  for (const NamedTensor& t : model_.state()) kept.push_back(t.tensor.clone());
  forward(images, labels, 0);
  backward();
  TrainStepOutput replayed;
  replay(images, labels, 0, replayed);  // records (a model that is never recorded: nothing)
  std::vector<NamedTensor> state = model_.state();
  for (size_t i = 0; i < state.size(); ++i) state[i].tensor.copy_from(kept[i]);
  for (auto& [name, p] : model_.parameters()) backend_.ops().fill(p->grad, 0.0f);
  backend_.synchronize();
  return true;
}

uint64_t TrainStep::step_seed(int64_t step) const {
  uint64_t seed = counter_hash(recipe_.seed, static_cast<uint64_t>(step));
  // Each rank its own crops, flips and dropout masks, as each GPU of a DDP job draws its own.
  if (comm_ && comm_->rank() > 0) seed = counter_hash(seed, static_cast<uint64_t>(comm_->rank()));
  return seed;
}

void TrainStep::set_recording(bool on) {
  record_ = on;
  if (!on) recording_.reset();
}

bool TrainStep::may_record() const {
  return record_ && !unsupported_ && !comm_ && !model_.observed() && !model_.draws_per_step();
}

// run()'s forward, loss and backward from the recording for this batch shape, made now where
// the shape was also the last step's; false where the step must run op by op.
bool TrainStep::replay(const Tensor& images, const Tensor& labels, int64_t step, TrainStepOutput& out) {
  replayed_ = false;
  if (!may_record()) return false;
  if (recording_ && (recording_->shape != images.shape() || !recording_->work->valid() ||
                     recording_->storage != model_.storage()))
    recording_.reset();
  if (!recording_) {
    // A shape's first step runs op by op: it makes the convolution plans (cuDNN's search waits
    // for the device, which a recording must not) and sizes the scratch buffers; and a shape
    // met once (an epoch's last, partial batch) is not worth a recording.
    if (images.shape() != last_eager_shape_) return false;
    auto r = std::make_unique<Recording>();
    r->shape = images.shape();
    r->x = backend_.empty(images.shape(), model_.compute_dtype(), model_.layout());  // (N, C, H, W)
    r->labels = backend_.empty(labels.shape(), labels.dtype());                      // (N)
    try {
      r->work = backend_.record([&] {
        // StepInfo's seed is unused: a model that draws per step is never recorded.
        const Tensor logits = model_.forward(backend_, r->x, StepInfo{true, 0, nullptr});  // (N, classes)
        r->loss = backend_.empty({1}, DType::f32);
        r->hits = backend_.empty({1}, DType::i32);
        Tensor dlogits = backend_.empty(logits.shape(), logits.dtype());  // (N, classes)
        backend_.ops().softmax_cross_entropy(logits, r->labels, static_cast<float>(recipe_.label_smoothing),
                                             r->loss, dlogits, r->hits);
        model_.backward(backend_, dlogits);
      });
    } catch (const DeviceError& e) {
      std::cerr << "convoy: " << e.what() << "; training op by op, without CUDA graphs\n";
      unsupported_ = true;
      return false;
    }
    if (!r->work) {  // the backend records nothing (the CPU)
      unsupported_ = true;
      return false;
    }
    r->storage = model_.storage();
    recording_ = std::move(r);
    ++recordings_;
  }
  Recording& r = *recording_;
  backend_.ops().normalize_augment(images, recipe_.augment, step_seed(step), r.x);
  r.labels.copy_from(labels);
  r.work->replay();
  // The recording's outputs are overwritten by the next replay; the caller reads these later.
  out.loss = r.loss.clone();
  out.hits = r.hits.clone();
  out.grad_stats = backend_.zeros({2}, DType::f32);
  replayed_ = true;
  return true;
}

TrainStepOutput TrainStep::forward(const Tensor& images, const Tensor& labels, int64_t step) {
  // Op by op: layers keep this step's tensors for backward; a recording's memory is its own,
  // but it is let go here, so that the two never hold memory at once.
  recording_.reset();
  last_eager_shape_ = images.shape();
  const uint64_t seed = step_seed(step);
  Ops& ops = backend_.ops();
  Tensor x = backend_.empty(images.shape(), model_.compute_dtype(), model_.layout());  // (N, C, H, W)
  ops.normalize_augment(images, recipe_.augment, seed, x);
  const Tensor logits = model_.forward(backend_, x, StepInfo{true, seed, sync_bn_.get()});  // (N, classes)
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
