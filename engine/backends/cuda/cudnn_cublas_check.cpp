#include "engine/backends/cuda/cudnn_cublas_check.h"

#include <string>

namespace convoy::cuda {

const char* cublas_status_text(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED (cuBLAS could not start)";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED (out of device memory)";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH (not supported by this GPU)";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unknown cuBLAS status";
}

void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* where) {
  throw DeviceError(std::string("cuDNN error ") + cudnnGetErrorString(status) + " in " + call +
                    " at " + where);
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* where) {
  throw DeviceError(std::string("cuBLAS error ") + cublas_status_text(status) + " in " + call +
                    " at " + where);
}

}  // namespace convoy::cuda
