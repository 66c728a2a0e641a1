#pragma once
// Layer: one node of a model's static DAG, with explicit forward and backward.
#include <cstdint>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/core/tensor.h"
#include "engine/layers/layer_spec.h"

namespace convoy {

// A trainable tensor. `value` and `grad` are f32 master copies; when the model computes
// in bf16, `compute` holds the bf16 copy layers read (refreshed before each step) and
// `compute_grad` the bf16 gradient layers write (cast into `grad` after backward).
struct Parameter {
  std::string name;      // "weight", "bias", ...
  Tensor value{};        // f32
  Tensor grad{};         // f32, same shape
  Tensor compute{};      // compute-dtype copy, or undefined when the compute dtype is f32
  Tensor compute_grad{}; // likewise
  bool weight_decay = true;  // false for biases and batch-norm affine parameters
  bool keep_f32 = false;     // batch-norm scale and shift stay f32 in mixed precision

  const Tensor& weight() const { return compute.defined() ? compute : value; }
  Tensor& weight_grad() { return compute_grad.defined() ? compute_grad : grad; }
};

// A non-trainable state tensor saved in checkpoints (batch-norm running statistics).
struct Buffer {
  std::string name;
  Tensor value{};  // f32
};

// Data-parallel batch norm (sync_batchnorm): per-channel sums over every rank's batch.
class BatchStatsSync {
 public:
  virtual ~BatchStatsSync() = default;
  virtual int ranks() const = 0;
  // This rank's values summed with every other rank's (a blocking collective: every rank calls it
  // in the same order, with as many values).
  virtual std::vector<double> sum(const std::vector<double>& values) = 0;
};

// What a forward pass needs to know beyond its inputs.
struct StepInfo {
  bool training = false;
  uint64_t seed = 0;  // random seed of this step (dropout); a pure function of (run seed, step)
  // Batch norm's statistics over all ranks, not this rank's batch alone; null: per GPU.
  BatchStatsSync* sync_bn = nullptr;
};

// x with its memory in `layout` (the same logical shape): a relabel where the memory order is
// the same either way, else a copy (channels-last activations meeting a flatten, say).
inline Tensor in_layout(Backend& backend, const Tensor& x, Layout layout) {
  if (x.layout() == layout) return x;
  const Tensor relabeled = x.with_layout(layout);
  if (same_memory_order(x, relabeled)) return relabeled;
  Tensor y = backend.empty(x.shape(), x.dtype(), layout);
  backend.ops().cast(x, y);
  return y;
}

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  // The model YAML's type name, "conv2d", ...: the spec's.
  std::string_view type() const { return layer_type(spec()); }
  // This layer's attributes: what its factory read, with the defaults for those not given.
  virtual LayerSpec spec() const = 0;

  // Checks the per-sample input shapes (no batch dimension, e.g. (C, H, W)), creates and
  // initializes the parameters on the CPU, and returns the per-sample output shape.
  // A mismatch throws InputError naming the layer and the shapes.
  virtual Shape build(std::span<const Shape> inputs, std::mt19937_64& rng) = 0;

  // inputs: batched tensors on the backend's device in the compute dtype.
  virtual Tensor forward(Backend& backend, std::span<const Tensor> inputs, const StepInfo& step) = 0;
  // Returns d(loss)/d(input) for each input (an undefined Tensor where
  // needs_input_grad[i] is false) and writes parameter gradients (overwriting them).
  virtual std::vector<Tensor> backward(Backend& backend, std::span<const Tensor> inputs,
                                       const Tensor& output, const Tensor& grad_output,
                                       std::span<const bool> needs_input_grad) = 0;

  // Where a layer's one input is also read by other layers (a residual join), Model sums their
  // gradients. A layer that can add its input gradient into that sum inside its own op (a
  // convolution: cuDNN's data gradient with beta = 1) says so here, and Model then calls
  // backward_adding, which does backward's work but adds d(loss)/d(input) into `input_grad`
  // (the other readers' sum, held by no one else) instead of returning it: the separate sum's
  // write and two reads of a whole activation are saved.
  virtual bool adds_input_grad() const { return false; }
  virtual void backward_adding(Backend& /*backend*/, std::span<const Tensor> /*inputs*/,
                               const Tensor& /*output*/, const Tensor& /*grad_output*/, Tensor& /*input_grad*/) {
    throw std::logic_error("backward_adding on a layer that does not add its input gradient");
  }

  // The ops forward and backward call, so that a model can ask a backend whether it runs
  // them (Model::unsupported_ops) before the first step instead of failing inside it.
  virtual std::vector<OpKind> ops() const = 0;

  // Takes over a ReLU that reads nothing but this layer's output (Model fuses such pairs, so
  // the pre-activation tensor is never written and read back): forward then returns
  // relu(output) and backward takes the gradient of that. False when this layer cannot;
  // `on` false undoes it.
  virtual bool fuse_relu(bool /*on*/) { return false; }

  // Residual joins: a layer that can add a tensor of its output's shape to its output in its
  // own pass (batch norm: relu(bn(x) + residual)) says so here. Model then runs it where an
  // add reads it and one other input, as forward_adding with that input and the add's fused
  // ReLU, and the add does no work of its own: the layer's output is never written and read
  // back. Its backward is unchanged (the add's backward applies the ReLU's mask).
  virtual bool adds_residual() const { return false; }
  virtual Tensor forward_adding(Backend& /*backend*/, std::span<const Tensor> /*inputs*/,
                                const Tensor& /*residual*/, bool /*relu*/, const StepInfo& /*step*/) {
    throw std::logic_error("forward_adding on a layer that does not add a residual");
  }

  // Inference only (Model::fold_batch_norms): a layer that can take over the work of the
  // convolution whose output it alone reads (batch norm: the convolution's weights scaled per
  // output channel, its shift as the convolution's bias, run as one op with the residual add and
  // ReLU in the convolution's epilogue, Ops::conv2d_forward_fused) says so here; the
  // convolution's node then hands its input through, and forward/forward_adding get that input.
  // Such a layer cannot train until unfold_conv().
  virtual bool fold_conv(Backend& /*backend*/, Layer& /*conv*/) { return false; }
  virtual void unfold_conv() {}

  // Whether a training forward draws from StepInfo::seed (dropout): such a step is different
  // work every time, so it cannot be replayed from a recording (TrainStep).
  virtual bool draws_per_step() const { return false; }

  virtual std::vector<Parameter*> parameters() { return {}; }
  virtual std::vector<Buffer*> buffers() { return {}; }
  // Multiply-adds x 2 of one forward pass for one sample, for the benchmark's FLOP count.
  virtual int64_t forward_flops(std::span<const Shape> inputs, const Shape& output) const { return 0; }

 private:
  std::string name_;
};

}  // namespace convoy
