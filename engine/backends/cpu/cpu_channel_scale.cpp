// channel_scale as OpenMP loops over the (sample, channel) planes of f32 nchw tensors.
#include "engine/backends/cpu/cpu_loops.h"
#include "engine/backends/cpu/cpu_ops.h"

namespace convoy::cpu {

void CpuOps::channel_scale_forward(const Tensor& x, const Tensor& s, Tensor& y) {
  check_channel_scale_forward(x, s, y, Device::cpu());
  require_supported(OpKind::channel_scale_forward, {{x, "x"}, {s, "s"}, {y, "y"}});
  const float* px = x.data<float>();
  const float* ps = s.data<float>();  // (N, C): one per plane, in plane order
  float* py = y.data<float>();
  const int64_t planes = x.dim(0) * x.dim(1), hw = x.dim(2) * x.dim(3);
#pragma omp parallel for num_threads(team(threads_)) if (x.numel() >= kParallelMin) schedule(static)
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = p * hw; i < (p + 1) * hw; ++i) py[i] = px[i] * ps[p];
}

void CpuOps::channel_scale_backward(const Tensor& x, const Tensor& s, const Tensor& dy, Tensor& dx, Tensor& ds) {
  check_channel_scale_backward(x, s, dy, dx, ds, Device::cpu());
  require_supported(OpKind::channel_scale_backward, {{x, "x"}, {s, "s"}, {dy, "dy"}, {dx, "dx"}, {ds, "ds"}});
  const float* px = x.data<float>();
  const float* ps = s.data<float>();
  const float* pdy = dy.data<float>();
  float* pdx = dx.defined() ? dx.data<float>() : nullptr;
  float* pds = ds.defined() ? ds.data<float>() : nullptr;
  const int64_t planes = x.dim(0) * x.dim(1), hw = x.dim(2) * x.dim(3);
#pragma omp parallel for num_threads(team(threads_)) if (x.numel() >= kParallelMin) schedule(static)
  for (int64_t p = 0; p < planes; ++p) {
    // A plane's sum in double: a 112x112 plane's 12,544 products lose no bits an f32 sum would.
    double sum = 0;
    for (int64_t i = p * hw; i < (p + 1) * hw; ++i) {
      if (pdx) pdx[i] = pdy[i] * ps[p];
      sum += static_cast<double>(pdy[i]) * px[i];
    }
    if (pds) pds[p] = static_cast<float>(sum);
  }
}

}  // namespace convoy::cpu
