#pragma once
// Host-side launchers of batchnorm.cu (no device code here; the backend includes it): batch
// norm per channel over a tensor viewed as (outer, C, inner), nchw (N, C, H*W) or nhwc and
// (N, C) matrices (N*H*W, C, 1). Each queues its work on `stream`, checks the launch, and
// returns without synchronizing. All per-channel arrays are f32.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/dt.cuh"

namespace convoy::kernels {

// Scratch that batchnorm_forward_train and batchnorm_backward need.
size_t batchnorm_scratch_bytes(int64_t outer, int64_t channels, int64_t inner);
// Training: batch statistics (biased var), y, saved mean and 1/sqrt(var + eps), running
// stats updated with the unbiased var. With relu, y = relu(bn(x)); with a residual (x's shape
// and dtype, a residual join's other input), y = bn(x) + residual, before the ReLU.
void batchnorm_forward_train(Dt dt, const void* x, const float* gamma, const float* beta,
                             float momentum, float eps, float* running_mean, float* running_var,
                             void* y, float* saved_mean, float* saved_invstd, int64_t outer,
                             int64_t channels, int64_t inner, void* scratch, cudaStream_t stream,
                             bool relu = false, const void* residual = nullptr);
// y = gamma (x - mean) * invstd + beta with invstd = 1/sqrt(running_var + eps), plus the
// residual where there is one; with relu, its max with 0.
void batchnorm_forward_eval(Dt dt, const void* x, const float* gamma, const float* beta,
                            const float* running_mean, const float* running_var, float eps,
                            void* y, int64_t outer, int64_t channels, int64_t inner,
                            cudaStream_t stream, bool relu = false, const void* residual = nullptr);
// dgamma, dbeta, and dx unless dx is null, from the saved statistics. With relu_beta (the
// forward's beta), dy is the gradient of relu(bn(x)) and the ReLU's mask is recomputed from x.
void batchnorm_backward(Dt dt, const void* x, const void* dy, const float* gamma,
                        const float* saved_mean, const float* saved_invstd, void* dx,
                        float* dgamma, float* dbeta, int64_t outer, int64_t channels,
                        int64_t inner, void* scratch, cudaStream_t stream,
                        const float* relu_beta = nullptr);

}  // namespace convoy::kernels
