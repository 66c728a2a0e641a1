// An empty kernel whose attributes the backend asks for at start-up: the runtime finds no
// image for the device when the binary was built for another architecture, and says so
// here rather than at the first real launch.
#include "kernels/probe.cuh"

namespace convoy::kernels {

// ---- kernels ------------------------------------------------------------------------------

__global__ void probe_kernel() {}

__global__ void fault_kernel() { __trap(); }

// ---- launchers ----------------------------------------------------------------------------

cudaError_t probe_kernel_image() {
  cudaFuncAttributes attr;
  return cudaFuncGetAttributes(&attr, probe_kernel);
}

void device_fault(cudaStream_t stream) {
  fault_kernel<<<1, 1, 0, stream>>>();
  // The launch itself succeeds; the trap surfaces at the next synchronisation.
}

}  // namespace convoy::kernels
