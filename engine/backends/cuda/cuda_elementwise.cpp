// CudaOps elementwise and data-movement ops: activations, adds, concat and split, dropout,
// cast and fill, all on Convoy's kernels.
#include "engine/backends/cuda/cuda_ops.h"

#include <vector>

#include "engine/backends/cuda/cuda_ops_internal.h"
#include "kernels/activation.cuh"
#include "kernels/elementwise.cuh"

namespace convoy::cuda {

void CudaOps::activation_forward(Activation kind, float alpha, const Tensor& x, Tensor& y) {
  check_activation_forward(x, y, device());
  require_supported(OpKind::activation_forward, x);
  kernels::activation_forward(kind, alpha, dt_of(x.dtype()), x.raw(), y.raw(), x.numel(),
                              ctx_.stream);
}

void CudaOps::activation_backward(Activation kind, float alpha, const Tensor& x, const Tensor& y,
                                  const Tensor& dy, Tensor& dx) {
  check_activation_backward(kind, alpha, x, y, dy, dx, device());
  // relu and leaky relu (alpha > 0) have the sign of their input, so y serves as well as x.
  const Tensor& in = x.defined() || !activation_backward_reads_output(kind, alpha) ? x : y;
  require_supported(OpKind::activation_backward, in);
  kernels::activation_backward(kind, alpha, dt_of(in.dtype()), in.raw(), dy.raw(), dx.raw(),
                               in.numel(), ctx_.stream);
}

void CudaOps::add(const Tensor& a, const Tensor& b, Tensor& y, bool relu) {
  check_add(a, b, y, device());
  require_supported(OpKind::add, a);
  kernels::add(dt_of(a.dtype()), a.raw(), b.raw(), y.raw(), a.numel(), ctx_.stream, relu);
}

void CudaOps::add_inplace(Tensor& y, const Tensor& x) {
  check_add_inplace(y, x, device());
  require_supported(OpKind::add_inplace, y);
  kernels::add_inplace(dt_of(y.dtype()), y.raw(), x.raw(), y.numel(), ctx_.stream);
}

void CudaOps::concat_channels(std::span<const Tensor> xs, Tensor& y) {
  std::vector<const Tensor*> ptrs;
  for (const Tensor& x : xs) ptrs.push_back(&x);
  check_concat_channels("concat_channels", ptrs, y, device());
  require_supported(OpKind::concat_channels, y);
  const ChannelView v = channel_view(y);
  int64_t offset = 0;
  for (const Tensor& x : xs) {
    kernels::copy_channels(static_cast<int>(dtype_size(x.dtype())), true, x.raw(), y.raw(), v.outer,
                           x.dim(1), v.channels, offset, v.inner, ctx_.stream);
    offset += x.dim(1);
  }
}

void CudaOps::split_channels(const Tensor& y, std::span<Tensor> xs) {
  std::vector<const Tensor*> ptrs;
  for (const Tensor& x : xs) ptrs.push_back(&x);
  check_concat_channels("split_channels", ptrs, y, device());
  require_supported(OpKind::split_channels, y);
  const ChannelView v = channel_view(y);
  int64_t offset = 0;
  for (Tensor& x : xs) {
    kernels::copy_channels(static_cast<int>(dtype_size(x.dtype())), false, x.raw(),
                           const_cast<void*>(y.raw()), v.outer, x.dim(1), v.channels, offset,
                           v.inner, ctx_.stream);
    offset += x.dim(1);
  }
}

void CudaOps::dropout_forward(float p, uint64_t seed, const Tensor& x, Tensor& y) {
  check_dropout("dropout_forward", p, x, y, device());
  require_supported(OpKind::dropout_forward, x);
  kernels::dropout(dt_of(x.dtype()), p, seed, x.raw(), y.raw(), x.numel(), ctx_.stream);
}

void CudaOps::dropout_backward(float p, uint64_t seed, const Tensor& dy, Tensor& dx) {
  check_dropout("dropout_backward", p, dy, dx, device());
  require_supported(OpKind::dropout_backward, dy);
  kernels::dropout(dt_of(dy.dtype()), p, seed, dy.raw(), dx.raw(), dy.numel(), ctx_.stream);
}

void CudaOps::cast(const Tensor& x, Tensor& y) {
  check_cast(x, y, device());
  require_supported(OpKind::cast, x);
  require_supported(OpKind::cast, y);
  if (!same_memory_order(x, y)) {
    kernels::cast_layout(dt_of(x.dtype()), x.raw(), dt_of(y.dtype()), y.raw(), x.dim(0), x.dim(1),
                         x.dim(2) * x.dim(3), y.layout() == Layout::nhwc, ctx_.stream);
    return;
  }
  kernels::cast(dt_of(x.dtype()), x.raw(), dt_of(y.dtype()), y.raw(), x.numel(), ctx_.stream);
}

void CudaOps::fill(Tensor& y, float value) {
  check_fill(y, device());
  require_supported(OpKind::fill, y);
  kernels::fill(dt_of(y.dtype()), y.raw(), value, y.numel(), ctx_.stream);
}

}  // namespace convoy::cuda
