// The elementwise and data-movement ops as OpenMP loops: add, add_inplace, channel concat and
// split, dropout, cast, fill.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/backends/cpu/cpu_loops.h"
#include "engine/backends/cpu/cpu_ops.h"
#include "engine/core/counter_rng.h"

namespace convoy::cpu {

namespace {

// concat/split's elements per channel (the product of y's dims after 1), y already checked.
int64_t channel_inner(const Tensor& y) {
  int64_t inner = 1;
  for (int d = 2; d < y.ndim(); ++d) inner *= y.dim(d);
  return inner;
}

// p in [0, 1], in and out f32 of one shape (check_dropout).
void dropout_apply(int threads, float p, uint64_t seed, const Tensor& in, Tensor& out) {
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  const float* pi = in.data<float>();
  float* po = out.data<float>();
  const int64_t n = in.numel();
#pragma omp parallel for num_threads(team(threads)) if (n >= kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i)
    po[i] = counter_uniform(seed, static_cast<uint64_t>(i)) >= p ? pi[i] * scale : 0.0f;
}

}  // namespace

// ---- add, concat and split ------------------------------------------------------------------

void CpuOps::add(const Tensor& a, const Tensor& b, Tensor& y, bool relu) {
  check_add(a, b, y, Device::cpu());
  require_supported(OpKind::add, {{a, "a"}, {b, "b"}, {y, "y"}});
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* py = y.data<float>();
  const int64_t n = y.numel();
#pragma omp parallel for num_threads(team(threads_)) if (n >= kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = pa[i] + pb[i];
    py[i] = relu && !(v > 0.f) ? 0.f : v;
  }
}

void CpuOps::add_inplace(Tensor& y, const Tensor& x) {
  check_add_inplace(y, x, Device::cpu());
  require_supported(OpKind::add_inplace, {{y, "y"}, {x, "x"}});
  const float* px = x.data<float>();
  float* py = y.data<float>();
  const int64_t n = y.numel();
#pragma omp parallel for num_threads(team(threads_)) if (n >= kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) py[i] += px[i];
}

void CpuOps::concat_channels(std::span<const Tensor> xs, Tensor& y) {
  std::vector<const Tensor*> parts;
  for (const Tensor& x : xs) parts.push_back(&x);
  check_concat_channels("concat_channels", parts, y, Device::cpu());
  require_supported(OpKind::concat_channels, {{y, "y"}});  // the parts share y's dtype and layout
  const int64_t inner = channel_inner(y);
  const int64_t n = y.dim(0);
  const size_t elem = dtype_size(y.dtype());
  const size_t y_row = static_cast<size_t>(y.dim(1) * inner) * elem;
  char* py = static_cast<char*>(y.raw());
#pragma omp parallel for num_threads(team(threads_)) if (y.numel() >= kParallelMin) schedule(static)
  for (int64_t s = 0; s < n; ++s) {
    size_t offset = static_cast<size_t>(s) * y_row;
    for (const Tensor& x : xs) {
      const size_t bytes = static_cast<size_t>(x.dim(1) * inner) * elem;
      std::memcpy(py + offset, static_cast<const char*>(x.raw()) + static_cast<size_t>(s) * bytes,
                  bytes);
      offset += bytes;
    }
  }
}

void CpuOps::split_channels(const Tensor& y, std::span<Tensor> xs) {
  std::vector<const Tensor*> parts;
  for (const Tensor& x : xs) parts.push_back(&x);
  check_concat_channels("split_channels", parts, y, Device::cpu());
  require_supported(OpKind::split_channels, {{y, "y"}});  // the parts share y's dtype and layout
  const int64_t inner = channel_inner(y);
  const int64_t n = y.dim(0);
  const size_t elem = dtype_size(y.dtype());
  const size_t y_row = static_cast<size_t>(y.dim(1) * inner) * elem;
  const char* py = static_cast<const char*>(y.raw());
#pragma omp parallel for num_threads(team(threads_)) if (y.numel() >= kParallelMin) schedule(static)
  for (int64_t s = 0; s < n; ++s) {
    size_t offset = static_cast<size_t>(s) * y_row;
    for (Tensor& x : xs) {
      const size_t bytes = static_cast<size_t>(x.dim(1) * inner) * elem;
      std::memcpy(static_cast<char*>(x.raw()) + static_cast<size_t>(s) * bytes, py + offset,
                  bytes);
      offset += bytes;
    }
  }
}

// ---- dropout --------------------------------------------------------------------------------

void CpuOps::dropout_forward(float p, uint64_t seed, const Tensor& x, Tensor& y) {
  check_dropout("dropout_forward", p, x, y, Device::cpu());
  require_supported(OpKind::dropout_forward, {{x, "x"}, {y, "y"}});
  dropout_apply(threads_, p, seed, x, y);
}

void CpuOps::dropout_backward(float p, uint64_t seed, const Tensor& dy, Tensor& dx) {
  check_dropout("dropout_backward", p, dy, dx, Device::cpu());
  require_supported(OpKind::dropout_backward, {{dy, "dy"}, {dx, "dx"}});
  dropout_apply(threads_, p, seed, dy, dx);
}

// ---- cast and fill --------------------------------------------------------------------------

void CpuOps::cast(const Tensor& x, Tensor& y) {
  check_cast(x, y, Device::cpu());
  require_supported(OpKind::cast, {{x, "x"}, {y, "y"}});
  const int64_t n = x.numel();
  const int nt = team(threads_);
  if (!same_memory_order(x, y)) {  // 4-D nchw <-> nhwc; element i of y from its place in x
    const int64_t c = x.dim(1), hw = x.dim(2) * x.dim(3), per_sample = c * hw;
    const bool to_nhwc = y.layout() == Layout::nhwc;
    with_reader(x, [&](auto read) {
      with_writer(y, [&](auto write) {
#pragma omp parallel for num_threads(nt) if (n >= kParallelMin) schedule(static)
        for (int64_t i = 0; i < n; ++i) {
          const int64_t s = i / per_sample, r = i % per_sample;
          write(i, read(s * per_sample + (to_nhwc ? (r % c) * hw + r / c : (r % hw) * c + r / hw)));
        }
      });
    });
    return;
  }
  if (x.dtype() == y.dtype()) {
    if (x.raw() != y.raw()) std::memcpy(y.raw(), x.raw(), x.nbytes());
    return;
  }
  with_reader(x, [&](auto read) {
    with_writer(y, [&](auto write) {
#pragma omp parallel for num_threads(nt) if (n >= kParallelMin) schedule(static)
      for (int64_t i = 0; i < n; ++i) write(i, read(i));
    });
  });
}

void CpuOps::fill(Tensor& y, float value) {
  constexpr const char* op = "fill";
  check_fill(y, Device::cpu());
  require_supported(OpKind::fill, {{y, "y"}});
  const int64_t n = y.numel();
  const int nt = team(threads_);
  auto fill_with = [&](auto* p, auto v) {
#pragma omp parallel for num_threads(nt) if (n >= kParallelMin) schedule(static)
    for (int64_t i = 0; i < n; ++i) p[i] = v;
  };
  switch (y.dtype()) {
    case DType::f32: fill_with(y.data<float>(), value); return;
    case DType::bf16: fill_with(y.data<uint16_t>(), float_to_bf16(value)); return;
    case DType::f16: fill_with(y.data<uint16_t>(), float_to_f16(value)); return;
    case DType::i32:
      if (value != std::trunc(value) || std::abs(value) > 2147483520.0f)
        OpCheck(op, Device::cpu()).fail(std::to_string(value) + " is not an I32 value");
      fill_with(y.data<int32_t>(), static_cast<int32_t>(value));
      return;
    case DType::u8:
      if (value != std::trunc(value) || value < 0.0f || value > 255.0f)
        OpCheck(op, Device::cpu()).fail(std::to_string(value) + " is not a U8 value");
      fill_with(y.data<uint8_t>(), static_cast<uint8_t>(value));
      return;
  }
}

}  // namespace convoy::cpu
