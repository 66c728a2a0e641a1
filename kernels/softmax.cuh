#pragma once
// Host-side launchers of softmax.cu (no device code here; the backend includes it). Each
// queues its work on `stream`, checks the launch, and returns without synchronizing.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/dt.cuh"

namespace convoy::kernels {

// Scratch softmax_cross_entropy needs for `rows` rows (per-row losses and hits).
size_t softmax_cross_entropy_scratch_bytes(int64_t rows);
// logits (rows, classes); loss f32 (1), dlogits (rows, classes) in `dt` or null,
// correct i32 (1) or null. A label outside [0, classes) makes the loss NaN.
void softmax_cross_entropy(Dt dt, const void* logits, const int32_t* labels, float smoothing,
                           float* loss, void* dlogits, int32_t* correct, int64_t rows,
                           int64_t classes, void* scratch, cudaStream_t stream);
// probs (rows, classes) f32 = softmax of each row of logits.
void softmax(Dt dt, const void* logits, float* probs, int64_t rows, int64_t classes,
             cudaStream_t stream);
// The softmax layer over C of x viewed as (outer, channels, inner) (nchw: (N, C, H*W); nhwc and
// (N, C): (N*H*W or N, C, 1)); y like x.
void channel_softmax_forward(Dt dt, const void* x, void* y, int64_t outer, int64_t channels, int64_t inner,
                             cudaStream_t stream);
// dx = y * (dy - sum_c y dy), the same view.
void channel_softmax_backward(Dt dt, const void* y, const void* dy, void* dx, int64_t outer, int64_t channels,
                              int64_t inner, cudaStream_t stream);

}  // namespace convoy::kernels
