#pragma once
// The base of Convoy's one check macro family: every CUDA runtime call and every kernel
// launch, in the kernels and in the backend alike, throws convoy::DeviceError with the call
// text, CUDA's message and file:line. engine/backends/cuda/cudnn_cublas_check.h adds cuDNN
// and cuBLAS on top of this; kernels/ sits below the backend, so this half lives here.
// Usable from .cpp (g++) and .cu (nvcc) files alike.
#include <cuda_runtime_api.h>

#include <string>

#include "engine/core/error.h"

namespace convoy::cuda {

// Inline so that kernels/ needs no .cpp of its own for one cold function.
[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* call, const char* where) {
  throw DeviceError(std::string("CUDA error ") + cudaGetErrorName(err) + " (" +
                    cudaGetErrorString(err) + ") in " + call + " at " + where);
}

}  // namespace convoy::cuda

#define CONVOY_WHERE_ __FILE__ ":" CONVOY_STRINGIFY(__LINE__)

#define CONVOY_CUDA_CHECK(call)                                                      \
  do {                                                                               \
    const cudaError_t convoy_err_ = (call);                                          \
    if (convoy_err_ != cudaSuccess)                                                  \
      ::convoy::cuda::throw_cuda_error(convoy_err_, #call, CONVOY_WHERE_);           \
  } while (0)

// After every kernel launch: catches bad launch configurations at once (and, in a
// debug run with CUDA_LAUNCH_BLOCKING=1, faults inside the kernel).
#define CONVOY_LAUNCH_CHECK(kernel)                                                  \
  do {                                                                               \
    const cudaError_t convoy_err_ = cudaGetLastError();                              \
    if (convoy_err_ != cudaSuccess)                                                  \
      ::convoy::cuda::throw_cuda_error(convoy_err_, "launch of " #kernel, CONVOY_WHERE_); \
  } while (0)
