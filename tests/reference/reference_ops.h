#pragma once
// A naive float64 reference of every op in engine/ops/ops.h: plain nested loops over
// std::vector<double>, written from the semantics documented there (PyTorch's), sharing no
// code with any backend. The ground truth for the CPU and the CUDA op tests. No gtest here,
// so both test binaries link it.
//
// Layout: every tensor is a flat row-major std::vector<double> plus its logical Shape
// ((N, C, H, W) for activations, (K, C/groups, R, S) for conv weights, (N, K) / (M, K) for
// linear). Results are returned by value; optimizer state is updated in place.
#include <cstdint>
#include <vector>

#include "engine/ops/ops.h"
#include "engine/core/tensor.h"

namespace convoy::ref {

using Vec = std::vector<double>;

// ---- conversions, inputs and comparison -----------------------------------------------------

// Values of any tensor (any dtype, any device) as doubles.
Vec to_vec(const Tensor& t);
// A CPU tensor holding `values` rounded to `dtype` (f32, bf16, f16, i32, u8).
Tensor to_tensor(const Vec& values, const Shape& shape, DType dtype = DType::f32);
// n values uniform in [lo, hi) from a seeded generator (deterministic per seed).
Vec random_vec(int64_t n, uint64_t seed, double lo = -1.0, double hi = 1.0);
// n integers uniform in [0, bound) from a seeded generator.
std::vector<int32_t> random_ints(int64_t n, int32_t bound, uint64_t seed);
// The nearest value representable in dtype (f32, bf16, f16; round half to even; overflow to
// inf), computed with frexp/ldexp rather than with the engine's bit tricks.
double round_to(double value, DType dtype);
double max_abs(const Vec& v);
// max_i |actual_i - expected_i| / max_i |expected_i|: the error relative to the reference's
// largest magnitude (plain absolute error when expected is all zeros). Returns +infinity on a
// size mismatch or when actual holds a NaN or an infinity the reference does not.
double max_relative_error(const Vec& actual, const Vec& expected);

// ---- convolution ----------------------------------------------------------------------------

// (N, K, P, Q) for x (N, C, H, W) and w (K, C/groups, R, S).
Shape conv2d_output_shape(const Conv2dParams& p, const Shape& x_shape, const Shape& w_shape);
// y (N, K, P, Q); b (K) or nullptr.
Vec conv2d_forward(const Conv2dParams& p, const Vec& x, const Shape& x_shape, const Vec& w,
                   const Shape& w_shape, const Vec* b);
// dx (N, C, H, W) from dy (N, K, P, Q).
Vec conv2d_backward_data(const Conv2dParams& p, const Vec& dy, const Shape& dy_shape,
                         const Vec& w, const Shape& w_shape, const Shape& x_shape);
// dw (K, C/groups, R, S).
Vec conv2d_backward_weights(const Conv2dParams& p, const Vec& x, const Shape& x_shape,
                            const Vec& dy, const Shape& dy_shape, const Shape& w_shape);
// db (K): dy summed over N, P, Q.
Vec conv2d_backward_bias(const Vec& dy, const Shape& dy_shape);

// ---- batch norm (x (N, C, H, W) or (N, C); per-channel vectors (C)) -------------------------

struct BatchNormTrain {
  Vec y;
  Vec saved_mean;    // batch mean
  Vec saved_invstd;  // 1 / sqrt(biased batch var + eps)
  Vec running_mean;  // (1 - momentum) * running + momentum * batch mean
  Vec running_var;   // (1 - momentum) * running + momentum * unbiased batch var
};
BatchNormTrain batchnorm_forward_train(const Vec& x, const Shape& x_shape, const Vec& gamma,
                                       const Vec& beta, double momentum, double eps,
                                       const Vec& running_mean, const Vec& running_var);
Vec batchnorm_forward_eval(const Vec& x, const Shape& x_shape, const Vec& gamma, const Vec& beta,
                           const Vec& running_mean, const Vec& running_var, double eps);
struct BatchNormGrads {
  Vec dx, dgamma, dbeta;
};
// Gradients of the training forward (batch statistics) given its saved mean and 1/std.
BatchNormGrads batchnorm_backward(const Vec& x, const Shape& x_shape, const Vec& dy,
                                  const Vec& gamma, const Vec& saved_mean,
                                  const Vec& saved_invstd);

// ---- activations (any shape) ----------------------------------------------------------------

// relu, leaky_relu (alpha = negative slope), gelu (exact erf form).
Vec activation_forward(Activation kind, double alpha, const Vec& x);
Vec activation_backward(Activation kind, double alpha, const Vec& x, const Vec& dy);

// ---- pooling --------------------------------------------------------------------------------

// (N, C, P, Q) for x (N, C, H, W), floor mode.
Shape pool2d_output_shape(const Pool2dParams& p, const Shape& x_shape);
// Max ignores padding; average divides by the window clipped to the input.
Vec pool2d_forward(const Pool2dParams& p, const Vec& x, const Shape& x_shape);
// dx (N, C, H, W); a max window's gradient goes to its first maximum in row-major order.
Vec pool2d_backward(const Pool2dParams& p, const Vec& x, const Shape& x_shape, const Vec& dy);

// ---- linear ---------------------------------------------------------------------------------

// y (N, M) = x (N, K) w (M, K)^T + b (M) (b may be nullptr).
Vec linear_forward(const Vec& x, const Shape& x_shape, const Vec& w, const Shape& w_shape,
                   const Vec* b);
struct LinearGrads {
  Vec dx;  // (N, K)
  Vec dw;  // (M, K)
  Vec db;  // (M)
};
LinearGrads linear_backward(const Vec& x, const Shape& x_shape, const Vec& w,
                            const Shape& w_shape, const Vec& dy);

// ---- elementwise, concat and split ----------------------------------------------------------

Vec add(const Vec& a, const Vec& b);
// xs[i] (N, C_i, ...) -> (N, sum C_i, ...).
Vec concat_channels(const std::vector<Vec>& xs, const std::vector<Shape>& shapes);
// y (N, sum C_i, ...) -> parts (N, C_i, ...) with C_i = channels[i].
std::vector<Vec> split_channels(const Vec& y, const Shape& y_shape,
                                const std::vector<int64_t>& channels);

// ---- channel_scale (squeeze-and-excitation's x * s) ---------------------------------------

// x (N, C, H, W), s one value per (n, c) -> y = x * s, s broadcast over H and W.
Vec channel_scale_forward(const Vec& x, const Shape& x_shape, const Vec& s);
struct ChannelScaleGrads {
  Vec dx;  // (N, C, H, W) = dy * s
  Vec ds;  // (N, C) = the sum over H and W of dy * x
};
ChannelScaleGrads channel_scale_backward(const Vec& x, const Shape& x_shape, const Vec& s, const Vec& dy);

// ---- dropout --------------------------------------------------------------------------------

// Whether element i survives: counter_uniform(seed, i) >= p.
bool dropout_keeps(float p, uint64_t seed, int64_t i);
// Kept elements scaled by 1 / (1 - p), the others 0 (backward is the same map on dy).
Vec dropout_forward(float p, uint64_t seed, const Vec& x);
Vec dropout_backward(float p, uint64_t seed, const Vec& dy);

// ---- softmax and cross-entropy --------------------------------------------------------------

struct CrossEntropy {
  double loss = 0;      // mean over the batch
  Vec dlogits;          // (N, C): d(mean loss) / d(logits)
  int64_t correct = 0;  // samples whose first argmax equals the label
};
// logits (N, C), labels (N); target = (1 - smoothing) one_hot + smoothing / C.
CrossEntropy softmax_cross_entropy(const Vec& logits, int64_t n, int64_t c,
                                   const std::vector<int32_t>& labels, double smoothing);
Vec softmax(const Vec& logits, int64_t n, int64_t c);

// ---- the softmax layer and upsampling (reference_resample.cpp) --------------------------------

// Softmax over dim 1 of x (N, C) or (N, C, H, W).
Vec channel_softmax(const Vec& x, const Shape& shape);
// dx = y (dy - sum_c y dy) over dim 1, y the forward's output.
Vec channel_softmax_backward(const Vec& y, const Vec& dy, const Shape& shape);
// x (N, C, H, W) -> (N, C, P, Q) by PyTorch's align_corners=False rules (engine/ops/upsample.h),
// in exact arithmetic.
Vec upsample_forward(UpsampleMode mode, const Vec& x, const Shape& x_shape, int64_t p, int64_t q);
// dy (N, C, P, Q) -> dx (N, C, H, W): each output's gradient scattered to what it read.
Vec upsample_backward(UpsampleMode mode, const Vec& dy, const Shape& x_shape, int64_t p, int64_t q);

// ---- cast -----------------------------------------------------------------------------------

// Every value rounded to `to` (see round_to).
Vec cast(const Vec& x, DType to);

// ---- optimizers (one step; state updated in place) ------------------------------------------

// PyTorch SGD, dampening 0: g = grad + wd p; buf = mu buf + g; g = nesterov ? g + mu buf : buf;
// p -= lr g.
void sgd_step(const SgdHyper& h, double weight_decay, Vec& param, const Vec& grad,
              Vec& momentum_buf);
// PyTorch AdamW at step h.step (1-based): p *= 1 - lr wd; m, v moments; bias-corrected update.
void adamw_step(const AdamHyper& h, double weight_decay, Vec& param, const Vec& grad, Vec& m,
                Vec& v);

// ---- input pipeline -------------------------------------------------------------------------

struct AugmentDraw {
  int64_t dy = 0, dx = 0;  // output (h, w) reads input (h + dy, w + dx) of the flipped image
  bool flip = false;
};
// The crop offsets and flip of one sample, from counter_hash(seed, sample) as ops.h states.
AugmentDraw augment_draw(const NormalizeAugment& a, uint64_t seed, int64_t sample);
// images (N, C, H, W) u8 values -> (augment(images) / 255 - mean[c]) / std[c].
Vec normalize_augment(const std::vector<uint8_t>& images, const Shape& shape,
                      const NormalizeAugment& a, uint64_t seed);

}  // namespace convoy::ref
