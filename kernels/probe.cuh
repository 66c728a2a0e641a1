#pragma once
// Host-side launcher of probe.cu (no device code here; the backend includes it).
#include <cuda_runtime_api.h>

namespace convoy::kernels {

// Probes that this binary holds kernel code the current device can run.
cudaError_t probe_kernel_image();

}  // namespace convoy::kernels
