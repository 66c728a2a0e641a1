#pragma once
// The cuDNN and cuBLAS half of the one macro family that checks every CUDA runtime, cuDNN and
// cuBLAS call and every kernel launch, and throws convoy::DeviceError with the call text, the
// library's message and file:line. kernels/cuda_runtime_check.h holds the CUDA runtime half
// (CONVOY_CUDA_CHECK, CONVOY_LAUNCH_CHECK), which the kernels use too; this header adds the
// libraries only the backend calls.
#include <cublas_v2.h>
#include <cudnn.h>

#include "kernels/cuda_runtime_check.h"

namespace convoy::cuda {

// Name and description of a cuBLAS status (cuBLAS has no status-to-string before 11.4).
const char* cublas_status_text(cublasStatus_t status);

[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* where);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* where);

}  // namespace convoy::cuda

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
