#pragma once
// Host-side launchers of upsample.cu (no device code here; the backend includes it). Each
// queues its work on `stream`, checks the launch, and returns without synchronizing.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/dt.cuh"

namespace convoy::kernels {

// The geometry of one resize: x (n, c, h, w) <-> y (n, c, p, q), both in one layout.
struct UpsampleGeom {
  int64_t n, c, h, w, p, q;
  bool nhwc;
  bool bilinear;  // else nearest (then p % h == 0 and q % w == 0: engine/ops/upsample.h)
};

// y = resize(x) by engine/ops/upsample.h's rules, f32 math in the dtype dt.
void upsample_forward(const UpsampleGeom& g, Dt dt, const void* x, void* y, cudaStream_t stream);
// dx = the sum of dy over the outputs each input element was read by, with their weights:
// one thread per input element gathers them (no atomics: deterministic in every dtype).
void upsample_backward(const UpsampleGeom& g, Dt dt, const void* dy, void* dx, cudaStream_t stream);

}  // namespace convoy::kernels
