// CudaOps' channel_scale (squeeze-and-excitation's x * s) on Convoy's kernels.
#include "engine/backends/cuda/cuda_ops.h"
#include "engine/backends/cuda/cuda_ops_internal.h"
#include "kernels/channel_scale.cuh"

namespace convoy::cuda {

void CudaOps::channel_scale_forward(const Tensor& x, const Tensor& s, Tensor& y) {
  check_channel_scale_forward(x, s, y, device());
  require_supported(OpKind::channel_scale_forward, x);
  kernels::channel_scale(dt_of(x.dtype()), x.raw(), s.raw(), y.raw(), x.dim(0), x.dim(1), x.dim(2) * x.dim(3),
                         x.layout() == Layout::nhwc, ctx_.stream);
}

void CudaOps::channel_scale_backward(const Tensor& x, const Tensor& s, const Tensor& dy, Tensor& dx, Tensor& ds) {
  check_channel_scale_backward(x, s, dy, dx, ds, device());
  require_supported(OpKind::channel_scale_backward, x);
  const int64_t n = x.dim(0), c = x.dim(1), hw = x.dim(2) * x.dim(3);
  const bool nhwc = x.layout() == Layout::nhwc;
  if (dx.defined()) kernels::channel_scale(dt_of(x.dtype()), dy.raw(), s.raw(), dx.raw(), n, c, hw, nhwc, ctx_.stream);
  if (ds.defined()) kernels::channel_scale_grad(dt_of(x.dtype()), x.raw(), dy.raw(), ds.raw(), n, c, hw, nhwc, ctx_.stream);
}

}  // namespace convoy::cuda
