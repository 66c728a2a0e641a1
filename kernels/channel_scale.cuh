#pragma once
// Host-side launchers of channel_scale.cu (no device code here; the backend includes it).
// Each queues its work on `stream`, checks the launch, and returns without synchronizing.
// x is (n, c, hw) in nchw or (n, hw, c) in nhwc; s is (n, c) either way.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/dt.cuh"

namespace convoy::kernels {

// y = x * s[sample, channel] (squeeze-and-excitation's scaling). Backward's dx = dy * s is this
// with dy as x.
void channel_scale(Dt dt, const void* x, const void* s, void* y, int64_t n, int64_t c, int64_t hw, bool nhwc,
                   cudaStream_t stream);
// ds[sample, channel] = the sum over hw of dy * x, in double, in a fixed order (deterministic).
void channel_scale_grad(Dt dt, const void* x, const void* dy, void* ds, int64_t n, int64_t c, int64_t hw, bool nhwc,
                        cudaStream_t stream);

}  // namespace convoy::kernels
