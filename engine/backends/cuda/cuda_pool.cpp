// CudaOps pooling, on Convoy's kernels (kernels/pool2d.cu).
#include "engine/backends/cuda/cuda_ops.h"

#include <string>

#include "engine/backends/cuda/cuda_ops_internal.h"
#include "kernels/pool2d.cuh"

namespace convoy::cuda {

namespace {

bool is_max(PoolKind kind) {
  switch (kind) {
    case PoolKind::max: return true;
    case PoolKind::avg: return false;
  }
  throw InternalError("pool2d: unknown pool kind " + std::to_string(static_cast<int>(kind)));
}

// x (N, C, H, W) and y (N, C, P, Q), checked by check_pool2d_* (y is pool2d_output_shape(x)).
kernels::PoolShape pool_shape(const Pool2dParams& p, const Tensor& x, const Tensor& y) {
  kernels::PoolShape s{};
  s.n = x.dim(0); s.c = x.dim(1); s.h = x.dim(2); s.w = x.dim(3);
  s.p = y.dim(2); s.q = y.dim(3);
  s.kernel_h = static_cast<int>(p.kernel_h); s.kernel_w = static_cast<int>(p.kernel_w);
  s.stride_h = static_cast<int>(p.stride_h); s.stride_w = static_cast<int>(p.stride_w);
  s.pad_h = static_cast<int>(p.pad_h); s.pad_w = static_cast<int>(p.pad_w);
  s.nhwc = x.layout() == Layout::nhwc;
  s.max = is_max(p.kind);
  return s;
}

}  // namespace

void CudaOps::pool2d_forward(const Pool2dParams& p, const Tensor& x, Tensor& y, Tensor& workspace,
                             bool training) {
  check_pool2d_forward(p, x, y, device());
  require_supported(OpKind::pool2d_forward, x);
  const kernels::PoolShape s = pool_shape(p, x, y);
  // A training max pool records each window's argmax (a byte per output element) for the
  // backward; elsewhere the backward finds the maxima again from x and y.
  workspace = Tensor();
  if (training && kernels::pool2d_records_argmax(s, dt_of(x.dtype()))) {
    Tensor argmax(y.shape(), DType::u8, ctx_.tensors, y.layout());
    if (kernels::pool2d_forward(s, dt_of(x.dtype()), x.raw(), y.raw(), ctx_.stream, argmax.data<uint8_t>()))
      workspace = argmax;
    return;
  }
  kernels::pool2d_forward(s, dt_of(x.dtype()), x.raw(), y.raw(), ctx_.stream);
}

void CudaOps::pool2d_backward(const Pool2dParams& p, const Tensor& x, const Tensor& y,
                              const Tensor& dy, const Tensor& workspace, Tensor& dx) {
  check_pool2d_backward(p, x, y, dy, dx, device());
  require_supported(OpKind::pool2d_backward, x);
  const kernels::PoolShape s = pool_shape(p, x, dy);
  const uint8_t* argmax = workspace.defined() && workspace.dtype() == DType::u8 ? workspace.data<uint8_t>() : nullptr;
  kernels::pool2d_backward(s, dt_of(x.dtype()), x.raw(), y.raw(), dy.raw(), dx.raw(), ctx_.stream, argmax);
}

}  // namespace convoy::cuda
