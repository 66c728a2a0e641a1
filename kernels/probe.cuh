#pragma once
// Host-side launcher of probe.cu (no device code here; the backend includes it).
#include <cuda_runtime_api.h>

namespace convoy::kernels {

// Probes that this binary holds kernel code the current device can run.
cudaError_t probe_kernel_image();

// Queues a kernel that traps on `stream`: a real device fault (sticky for the context, as an
// uncorrectable ECC error or a lost GPU is), for the fault-injection test hook. Does not
// wait for it.
void device_fault(cudaStream_t stream);

}  // namespace convoy::kernels
