#pragma once
// Host-side launchers of Convoy's own CUDA kernels (kernels/*.cu). This header holds no
// device code, so the backend's C++ files include it too. Every launcher queues its work
// on `stream`, checks the launch, and returns without synchronizing.
// Element types travel as Dt (the .cu files are built as C++17 and see no Tensor).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace convoy::kernels {

enum class Dt : int { f32 = 0, bf16 = 1, f16 = 2, i32 = 3, u8 = 4 };  // == convoy::DType
enum class Act : int { relu = 0, leaky_relu = 1, gelu = 2 };         // == convoy::Activation

// Probes that this binary holds kernel code the current device can run.
cudaError_t probe_kernel_image();

// ---- elementwise.cu ---------------------------------------------------------------------
// y = act(x); dx = dy * act'(x). For relu/leaky_relu `x` may be the output y instead.
void activation_forward(Act kind, float alpha, Dt dt, const void* x, void* y, int64_t n,
                        cudaStream_t stream);
void activation_backward(Act kind, float alpha, Dt dt, const void* x, const void* dy, void* dx,
                         int64_t n, cudaStream_t stream);
void add(Dt dt, const void* a, const void* b, void* y, int64_t n, cudaStream_t stream);
void add_inplace(Dt dt, void* y, const void* x, int64_t n, cudaStream_t stream);
void cast(Dt from, const void* x, Dt to, void* y, int64_t n, cudaStream_t stream);
// cast between a 4-D (n, c, h*w) nchw tensor and its nhwc form (to_nhwc), or back.
void cast_layout(Dt from, const void* x, Dt to, void* y, int64_t n, int64_t c, int64_t hw, bool to_nhwc,
                 cudaStream_t stream);
void fill(Dt dt, void* y, float value, int64_t n, cudaStream_t stream);
// Inverted dropout over element indices [0, n): kept iff counter_uniform(seed, i) >= p.
void dropout(Dt dt, float p, uint64_t seed, const void* x, void* y, int64_t n, cudaStream_t stream);
// y (outer, C, inner) += b[c] (b f32 or the same dtype as y).
void bias_add(Dt dt, void* y, Dt bias_dt, const void* b, int64_t outer, int64_t channels,
              int64_t inner, cudaStream_t stream);
// Copies x (outer, cx, inner) into channels [offset, offset + cx) of y (outer, cy, inner),
// or back when `to_y` is false: concat and split along channels in either layout.
void copy_channels(int elem_size, bool to_y, const void* x, void* y, int64_t outer, int64_t cx,
                   int64_t cy, int64_t offset, int64_t inner, cudaStream_t stream);

// ---- reduce.cu: per-channel reductions and batch norm -------------------------------------
// Scratch needed by the reductions below for a (outer, C, inner) tensor.
size_t channel_reduce_scratch_bytes(int64_t outer, int64_t channels, int64_t inner);
// out[c] = sum of x[:, c, :] (f32 accumulation in double), written as `out_dt`.
void channel_sum(Dt dt, const void* x, Dt out_dt, void* out, int64_t outer, int64_t channels,
                 int64_t inner, void* scratch, cudaStream_t stream);
// Batch norm, training: batch statistics (biased var), y, saved mean and 1/sqrt(var + eps),
// running stats updated with the unbiased var. All per-channel arrays are f32.
void batchnorm_forward_train(Dt dt, const void* x, const float* gamma, const float* beta,
                             float momentum, float eps, float* running_mean, float* running_var,
                             void* y, float* saved_mean, float* saved_invstd, int64_t outer,
                             int64_t channels, int64_t inner, void* scratch, cudaStream_t stream);
// y = gamma (x - mean) * invstd + beta with invstd = 1/sqrt(var + eps) (eval) or given.
void batchnorm_forward_eval(Dt dt, const void* x, const float* gamma, const float* beta,
                            const float* running_mean, const float* running_var, float eps,
                            void* y, int64_t outer, int64_t channels, int64_t inner,
                            cudaStream_t stream);
void batchnorm_backward(Dt dt, const void* x, const void* dy, const float* gamma,
                        const float* saved_mean, const float* saved_invstd, void* dx,
                        float* dgamma, float* dbeta, int64_t outer, int64_t channels,
                        int64_t inner, void* scratch, cudaStream_t stream);

// ---- pool.cu ------------------------------------------------------------------------------
struct PoolShape {
  int64_t n, c, h, w, p, q;  // input (n, c, h, w), output (n, c, p, q)
  int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  bool nhwc;
  bool max;  // else average over the window clipped to the unpadded input
};
void pool2d_forward(const PoolShape& s, Dt dt, const void* x, void* y, cudaStream_t stream);
// Max: the gradient goes to the first maximum of each window (PyTorch's choice).
void pool2d_backward(const PoolShape& s, Dt dt, const void* x, const void* dy, void* dx,
                     cudaStream_t stream);

// ---- softmax.cu ---------------------------------------------------------------------------
size_t softmax_cross_entropy_scratch_bytes(int64_t rows);
// logits (rows, classes); loss f32 (1), dlogits (rows, classes) in `dt` or null,
// correct i32 (1) or null. A label outside [0, classes) makes the loss NaN.
void softmax_cross_entropy(Dt dt, const void* logits, const int32_t* labels, float smoothing,
                           float* loss, void* dlogits, int32_t* correct, int64_t rows,
                           int64_t classes, void* scratch, cudaStream_t stream);
void softmax(Dt dt, const void* logits, float* probs, int64_t rows, int64_t classes,
             cudaStream_t stream);

// ---- optim.cu -----------------------------------------------------------------------------
struct SgdSlotDev {
  float* param;
  const float* grad;
  float* buf;  // null: no momentum buffer (momentum 0)
  float weight_decay;
  int64_t n;
};
struct AdamSlotDev {
  float* param;
  const float* grad;
  float* m;
  float* v;
  float weight_decay;
  int64_t n;
};
// Elements per block of the fused updates; the host builds `block_start` (slots + 1
// entries: the first block of each slot, then the total) with this chunk size.
constexpr int64_t kOptimChunk = 8192;
void sgd_update(const SgdSlotDev* slots, const int64_t* block_start, int num_slots,
                int64_t num_blocks, float lr, float momentum, bool nesterov, cudaStream_t stream);
// step_size = lr / (1 - beta1^step), inv_sqrt_bc2 = 1 / sqrt(1 - beta2^step), both
// computed on the host in double.
void adamw_update(const AdamSlotDev* slots, const int64_t* block_start, int num_slots,
                  int64_t num_blocks, float lr, float beta1, float beta2, float eps,
                  float step_size, float inv_sqrt_bc2, cudaStream_t stream);

// ---- augment.cu ---------------------------------------------------------------------------
struct NormalizeAugmentArgs {
  float mean[4], std[4];
  int64_t crop_padding;
  bool horizontal_flip;
  uint64_t seed;
  int64_t n, c, h, w;
  bool nhwc_out;
};
void normalize_augment(const NormalizeAugmentArgs& a, const uint8_t* images, Dt out_dt, void* y,
                       cudaStream_t stream);

}  // namespace convoy::kernels
