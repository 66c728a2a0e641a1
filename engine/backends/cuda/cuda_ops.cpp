#include "engine/backends/cuda/cuda_ops.h"

#include <cstdlib>
#include <cstring>

#include "engine/backends/cuda/cuda_ops_internal.h"

namespace convoy::cuda {

CudaOps::CudaOps(const CudaContext& ctx) : ctx_(ctx) {
  conv_workspace_.bind(ctx_.allocator);
  scratch_.bind(ctx_.allocator);
  slots_.bind(ctx_.allocator);
  // For tests and debugging: batch norm through Convoy's kernels instead of cuDNN.
  if (const char* e = std::getenv("CONVOY_CUDA_BN_KERNELS"); e && std::strcmp(e, "1") == 0)
    bn_kernels_only_.fill(true);
}

CudaOps::~CudaOps() = default;

}  // namespace convoy::cuda
