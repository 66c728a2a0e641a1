// CudaOps upsample (nearest and bilinear, forward and backward) on Convoy's kernels: cuDNN has
// no resize, and the kernels index either layout.
#include "engine/backends/cuda/cuda_ops.h"

#include "engine/backends/cuda/cuda_ops_internal.h"
#include "kernels/upsample.cuh"

namespace convoy::cuda {

namespace {

// x (N, C, H, W) and y (N, C, P, Q), already checked to share dtype and layout.
kernels::UpsampleGeom upsample_geom(UpsampleMode mode, const Tensor& x, const Tensor& y) {
  return {x.dim(0), x.dim(1), x.dim(2), x.dim(3), y.dim(2), y.dim(3), x.layout() == Layout::nhwc,
          mode == UpsampleMode::bilinear};
}

}  // namespace

void CudaOps::upsample_forward(UpsampleMode mode, const Tensor& x, Tensor& y) {
  check_upsample_forward(mode, x, y, device());
  require_supported(OpKind::upsample_forward, x);
  kernels::upsample_forward(upsample_geom(mode, x, y), dt_of(x.dtype()), x.raw(), y.raw(), ctx_.stream);
}

void CudaOps::upsample_backward(UpsampleMode mode, const Tensor& dy, Tensor& dx) {
  check_upsample_backward(mode, dy, dx, device());
  require_supported(OpKind::upsample_backward, dy);
  kernels::upsample_backward(upsample_geom(mode, dx, dy), dt_of(dy.dtype()), dy.raw(), dx.raw(), ctx_.stream);
}

}  // namespace convoy::cuda
