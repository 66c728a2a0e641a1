#pragma once
// Host-side launchers of activation.cu (no device code here; the backend includes it).
// Each queues its work on `stream`, checks the launch, and returns without synchronizing.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/ops/activation.h"
#include "kernels/dt.cuh"

namespace convoy::kernels {

// y = act(x), n elements of a floating dtype; alpha is leaky_relu's negative slope (the
// other kinds ignore it).
void activation_forward(Activation kind, float alpha, Dt dt, const void* x, void* y, int64_t n,
                        cudaStream_t stream);
// dx = dy * act'(x). When activation_backward_reads_output(kind, alpha), `x` may be the
// output y instead (relu and leaky relu keep their input's sign).
void activation_backward(Activation kind, float alpha, Dt dt, const void* x, const void* dy, void* dx,
                         int64_t n, cudaStream_t stream);

}  // namespace convoy::kernels
