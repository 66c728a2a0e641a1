#pragma once
// Host-side launchers of bias.cu (no device code here; the backend includes it): the bias
// of convolutions and linear layers, forward and backward. Each queues its work on
// `stream`, checks the launch, and returns without synchronizing.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/dt.cuh"

namespace convoy::kernels {

// y (outer, C, inner) += b[c] (b f32 or the same dtype as y).
void bias_add(Dt dt, void* y, Dt bias_dt, const void* b, int64_t outer, int64_t channels,
              int64_t inner, cudaStream_t stream);

// Scratch bias_grad needs for a (outer, C, inner) dy.
size_t bias_grad_scratch_bytes(int64_t outer, int64_t channels, int64_t inner);
// db[c] = sum of dy[:, c, :] (accumulated in double, deterministic), written as `db_dt`.
void bias_grad(Dt dt, const void* dy, Dt db_dt, void* db, int64_t outer, int64_t channels,
               int64_t inner, void* scratch, cudaStream_t stream);

}  // namespace convoy::kernels
