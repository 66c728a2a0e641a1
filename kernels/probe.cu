// An empty kernel whose attributes the backend asks for at start-up: the runtime finds no
// image for the device when the binary was built for another architecture, and says so
// here rather than at the first real launch.
#include "kernels/probe.cuh"

namespace convoy::kernels {

// ---- kernels ------------------------------------------------------------------------------

__global__ void probe_kernel() {}

// ---- launchers ----------------------------------------------------------------------------

cudaError_t probe_kernel_image() {
  cudaFuncAttributes attr;
  return cudaFuncGetAttributes(&attr, probe_kernel);
}

}  // namespace convoy::kernels
