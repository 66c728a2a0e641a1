#pragma once
// Host-side launchers of elementwise.cu (no device code here; the backend includes it).
// Each queues its work on `stream`, checks the launch, and returns without synchronizing.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/dt.cuh"

namespace convoy::kernels {

// y = a + b, n elements of a floating dtype; with relu, relu(a + b).
void add(Dt dt, const void* a, const void* b, void* y, int64_t n, cudaStream_t stream, bool relu = false);
// y += x.
void add_inplace(Dt dt, void* y, const void* x, int64_t n, cudaStream_t stream);
// y = x converted between floating dtypes, n elements in the same memory order.
void cast(Dt from, const void* x, Dt to, void* y, int64_t n, cudaStream_t stream);
// cast between a 4-D (n, c, h*w) nchw tensor and its nhwc form (to_nhwc), or back.
void cast_layout(Dt from, const void* x, Dt to, void* y, int64_t n, int64_t c, int64_t hw, bool to_nhwc,
                 cudaStream_t stream);
// y = value converted to dt (any of the five dtypes).
void fill(Dt dt, void* y, float value, int64_t n, cudaStream_t stream);
// Inverted dropout over element indices [0, n): kept iff counter_uniform(seed, i) >= p.
// Forward and backward alike: backward passes dy as x and regenerates the same mask.
void dropout(Dt dt, float p, uint64_t seed, const void* x, void* y, int64_t n, cudaStream_t stream);
// Copies x (outer, cx, inner) into channels [offset, offset + cx) of y (outer, cy, inner),
// or back when `to_y` is false: concat and split along channels in either layout.
void copy_channels(int elem_size, bool to_y, const void* x, void* y, int64_t outer, int64_t cx,
                   int64_t cy, int64_t offset, int64_t inner, cudaStream_t stream);

}  // namespace convoy::kernels
