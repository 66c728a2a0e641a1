#pragma once
// The op set every backend implements. Each op (or op family) has its own header beside
// this one: its parameters, output-shape function and argument checks, shared by every
// backend; this file lists them all in one interface. Layers call these; each backend (CPU: oneDNN and
// OpenMP loops; CUDA: cuDNN, cuBLAS and kernels/) implements them for its device.
// Outputs are preallocated by the caller with the right shape and dtype on the backend's
// device and are overwritten, never accumulated into (except add_inplace).
// Shapes: 4-D activations are logically (N, C, H, W) whatever their Layout.
#include <cstdint>
#include <span>
#include <type_traits>

#include "engine/core/tensor.h"
#include "engine/ops/activation.h"
#include "engine/ops/activation_check.h"
#include "engine/ops/batchnorm.h"
#include "engine/ops/channel_scale.h"
#include "engine/ops/conv2d.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/linear.h"
#include "engine/ops/normalize_augment.h"
#include "engine/ops/op_check.h"
#include "engine/ops/op_list.h"
#include "engine/ops/optimizer_update.h"
#include "engine/ops/pool2d.h"
#include "engine/ops/softmax.h"
#include "engine/ops/upsample.h"

namespace convoy {

// Every op of the set, for supports() and for the op test harness's "every op has cases".
enum class OpKind : uint8_t {
#define CONVOY_OP_KIND(op) op,
  CONVOY_OPS(CONVOY_OP_KIND)
#undef CONVOY_OP_KIND
};
inline constexpr OpKind kAllOps[] = {
#define CONVOY_OP_KIND(op) OpKind::op,
    CONVOY_OPS(CONVOY_OP_KIND)
#undef CONVOY_OP_KIND
};
// "conv2d_forward", ...: the op's method name.
const char* op_name(OpKind op);

class Ops {
 public:
  virtual ~Ops() = default;

  // Whether this backend runs `op` on data of `dtype` (the activations' or, for the
  // optimizer updates, the parameters' dtype) in `layout` (4-D activations; nchw for
  // everything else). Callers ask before they run, instead of catching a late throw.
  virtual bool supports(OpKind op, DType dtype, Layout layout) const = 0;

  // x (N, C, H, W), w (K, C/groups, R, S), b (K) or undefined, y (N, K, P, Q).
  virtual void conv2d_forward(const Conv2dParams& p, const Tensor& x, const Tensor& w,
                              const Tensor& b, Tensor& y) = 0;
  // Inference with batch norm folded into the convolution (Model::fold_batch_norms):
  // y = conv(x, w) + b, + `residual` (y's shape, dtype and layout) where given, then a ReLU
  // where `relu`, in one pass where the backend fuses them (cuDNN's graph API: the epilogue of
  // the convolution's own kernel). b (K) f32. False, with nothing done, where this backend
  // cannot for these shapes and dtypes: the caller then runs the ops one by one.
  virtual bool conv2d_forward_fused(const Conv2dParams& /*p*/, const Tensor& /*x*/, const Tensor& /*w*/,
                                    const Tensor& /*b*/, const Tensor* /*residual*/, bool /*relu*/, Tensor& /*y*/) {
    return false;
  }
  // dy (N, K, P, Q), w (K, C/groups, R, S) -> dx (N, C, H, W); with `accumulate`, dx += the
  // data gradient (a residual join's sum, done in cuDNN's epilogue with beta = 1).
  virtual void conv2d_backward_data(const Conv2dParams& p, const Tensor& dy, const Tensor& w,
                                    Tensor& dx, bool accumulate = false) = 0;
  // x (N, C, H, W), dy (N, K, P, Q) -> dw (K, C/groups, R, S), db (K) unless undefined.
  virtual void conv2d_backward_weights(const Conv2dParams& p, const Tensor& x, const Tensor& dy,
                                       Tensor& dw, Tensor& db) = 0;

  // Batch norm per channel over (N, H, W). gamma, beta, running_*, saved_*: (C) f32.
  // Training: normalizes with the batch statistics, saves mean and 1/sqrt(var + eps)
  // (biased var), and updates running_mean/var in place with the unbiased var:
  // running = (1 - momentum) * running + momentum * batch.
  // With `relu`, y = relu(bn(x)) (a ReLU fused after the batch norm, Layer::fuse_relu). With
  // a `residual` (x's shape, dtype and layout: a residual join's other input, Layer::
  // forward_adding), y = bn(x) + residual, before the ReLU: the join's add in the same pass.
  virtual void batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                       float momentum, float eps, Tensor& running_mean,
                                       Tensor& running_var, Tensor& y, Tensor& saved_mean,
                                       Tensor& saved_invstd, bool relu = false,
                                       const Tensor* residual = nullptr) = 0;
  virtual void batchnorm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                      const Tensor& running_mean, const Tensor& running_var,
                                      float eps, Tensor& y, bool relu = false,
                                      const Tensor* residual = nullptr) = 0;
  // With `relu_beta` (the forward's beta), dy is the gradient of relu(bn(x)): the ReLU's mask
  // is recomputed from x and the saved statistics, so bn(x) itself is never stored.
  virtual void batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                  const Tensor& saved_mean, const Tensor& saved_invstd,
                                  Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                                  const Tensor* relu_beta = nullptr) = 0;

  // Elementwise activation; alpha is leaky_relu's negative slope. Any shape.
  virtual void activation_forward(Activation kind, float alpha, const Tensor& x, Tensor& y) = 0;
  virtual void activation_backward(Activation kind, float alpha, const Tensor& x, const Tensor& y,
                                   const Tensor& dy, Tensor& dx) = 0;

  // x (N, C, H, W) -> y (N, C, P, Q). `workspace` is the backend's own record of a
  // training forward (e.g. max indices); backward receives it back. It may stay undefined.
  virtual void pool2d_forward(const Pool2dParams& p, const Tensor& x, Tensor& y, Tensor& workspace,
                              bool training) = 0;
  virtual void pool2d_backward(const Pool2dParams& p, const Tensor& x, const Tensor& y,
                               const Tensor& dy, const Tensor& workspace, Tensor& dx) = 0;

  // x (N, K), w (M, K), b (M) or undefined -> y (N, M) = x w^T + b.
  virtual void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) = 0;
  // dy (N, M) -> dx (N, K) unless undefined, dw (M, K), db (M) unless undefined.
  virtual void linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
                               Tensor& dw, Tensor& db) = 0;

  // y = a + b, all the same shape; with `relu`, y = relu(a + b).
  virtual void add(const Tensor& a, const Tensor& b, Tensor& y, bool relu = false) = 0;
  // y += x, the same shape (gradients of a tensor read by several layers).
  virtual void add_inplace(Tensor& y, const Tensor& x) = 0;
  // Concatenate (N, C_i, H, W) along C into y, and the reverse.
  virtual void concat_channels(std::span<const Tensor> xs, Tensor& y) = 0;
  virtual void split_channels(const Tensor& y, std::span<Tensor> xs) = 0;

  // Inverted dropout: element i is kept iff counter_uniform(seed, i) >= p, then scaled by
  // 1 / (1 - p). Backward regenerates the same mask from the seed.
  virtual void dropout_forward(float p, uint64_t seed, const Tensor& x, Tensor& y) = 0;
  virtual void dropout_backward(float p, uint64_t seed, const Tensor& dy, Tensor& dx) = 0;

  // Squeeze-and-excitation's channel-wise product: x (N, C, H, W), s (N, C) or (N, C, 1, 1) ->
  // y (x's shape) = x * s, s broadcast over H and W.
  virtual void channel_scale_forward(const Tensor& x, const Tensor& s, Tensor& y) = 0;
  // dy (x's shape) -> dx = dy * s and ds (s's shape) = the sum over H and W of dy * x, each
  // unless undefined.
  virtual void channel_scale_backward(const Tensor& x, const Tensor& s, const Tensor& dy, Tensor& dx,
                                      Tensor& ds) = 0;

  // logits (N, C) (f32 or bf16), labels (N) i32. Computes the mean over the batch of the
  // cross-entropy with label smoothing s (target = (1 - s) one_hot + s / C), in f32:
  // loss (1) f32; dlogits (N, C) in logits' dtype = d(mean loss)/d(logits), unless
  // undefined; correct (1) i32 = count of argmax(logits) == label.
  virtual void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float smoothing,
                                     Tensor& loss, Tensor& dlogits, Tensor& correct) = 0;
  // logits (N, C) -> probs (N, C) f32.
  virtual void softmax(const Tensor& logits, Tensor& probs) = 0;
  // The softmax layer: over C of x (N, C) or (N, C, H, W), y like x (dtype and layout), computed
  // in f32 after subtracting each position's maximum. Backward: dx = y * (dy - sum_c y dy).
  virtual void channel_softmax_forward(const Tensor& x, Tensor& y) = 0;
  virtual void channel_softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) = 0;

  // Nearest or bilinear resizing (upsample.h's rules): x (N, C, H, W) -> y (N, C, P, Q), the
  // size y's. Backward sums each output's gradient into the input pixels it was read from.
  virtual void upsample_forward(UpsampleMode mode, const Tensor& x, Tensor& y) = 0;
  virtual void upsample_backward(UpsampleMode mode, const Tensor& dy, Tensor& dx) = 0;

  // Converts between f32, bf16 and f16 (same shape); a 4-D y may also have the other layout
  // (nchw <-> nhwc).
  virtual void cast(const Tensor& x, Tensor& y) = 0;
  virtual void fill(Tensor& y, float value) = 0;

  // Updates all parameters at once (one fused launch on the GPU).
  virtual void sgd_update(std::span<const SgdSlot> slots, const SgdHyper& h) = 0;
  virtual void adamw_update(std::span<const AdamSlot> slots, const AdamHyper& h) = 0;

  // images u8 (N, C, H, W) -> y (N, C, H, W), f32 or bf16:
  // y = (augment(images) / 255 - mean[c]) / std[c]. For sample n, with
  // r = counter_hash(seed, n): the crop offsets are dy = r % (2 pad + 1) - pad,
  // dx = (r >> 16) % (2 pad + 1) - pad (output pixel (h, w) reads input (h + dy, w + dx),
  // zero outside), and the sample is flipped horizontally first iff (r >> 32) & 1.
  virtual void normalize_augment(const Tensor& images, const NormalizeAugment& a, uint64_t seed,
                                 Tensor& y) = 0;
};

// The methods above keep their own declarations (each op's signature is its own); the list
// names each of them, so that an entry without its method, or a renamed method, does not compile.
// (A method without an entry cannot call require_supported with its OpKind, which each backend's
// implementation does.)
#define CONVOY_OP_HAS_METHOD(op) \
  static_assert(std::is_member_function_pointer_v<decltype(&Ops::op)>, "CONVOY_OPS names an Ops method");
CONVOY_OPS(CONVOY_OP_HAS_METHOD)
#undef CONVOY_OP_HAS_METHOD

}  // namespace convoy
