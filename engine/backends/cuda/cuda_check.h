#pragma once
// One macro family that checks every CUDA runtime, cuDNN and cuBLAS call and every kernel
// launch, and throws convoy::DeviceError with the call text, the library's message and
// file:line. Usable from .cpp (g++) and .cu (nvcc) files alike.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <string>

#include "engine/core/error.h"

namespace convoy::cuda {

// Name and description of a cuBLAS status (cuBLAS has no status-to-string before 11.4).
const char* cublas_status_text(cublasStatus_t status);

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* where);
[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* where);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* where);

}  // namespace convoy::cuda

#define CONVOY_WHERE_ __FILE__ ":" CONVOY_STRINGIFY(__LINE__)

#define CONVOY_CUDA_CHECK(call)                                                      \
  do {                                                                               \
    const cudaError_t convoy_err_ = (call);                                          \
    if (convoy_err_ != cudaSuccess)                                                  \
      ::convoy::cuda::throw_cuda_error(convoy_err_, #call, CONVOY_WHERE_);           \
  } while (0)

#define CONVOY_CUDNN_CHECK(call)                                                     \
  do {                                                                               \
    const cudnnStatus_t convoy_st_ = (call);                                         \
    if (convoy_st_ != CUDNN_STATUS_SUCCESS)                                          \
      ::convoy::cuda::throw_cudnn_error(convoy_st_, #call, CONVOY_WHERE_);           \
  } while (0)

#define CONVOY_CUBLAS_CHECK(call)                                                    \
  do {                                                                               \
    const cublasStatus_t convoy_st_ = (call);                                        \
    if (convoy_st_ != CUBLAS_STATUS_SUCCESS)                                         \
      ::convoy::cuda::throw_cublas_error(convoy_st_, #call, CONVOY_WHERE_);          \
  } while (0)

// After every kernel launch: catches bad launch configurations at once (and, in a
// debug run with CUDA_LAUNCH_BLOCKING=1, faults inside the kernel).
#define CONVOY_LAUNCH_CHECK(kernel)                                                  \
  do {                                                                               \
    const cudaError_t convoy_err_ = cudaGetLastError();                              \
    if (convoy_err_ != cudaSuccess)                                                  \
      ::convoy::cuda::throw_cuda_error(convoy_err_, "launch of " #kernel, CONVOY_WHERE_); \
  } while (0)
