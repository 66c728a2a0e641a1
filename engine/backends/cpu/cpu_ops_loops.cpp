// The CPU ops written as OpenMP loops: adds, channel concat/split, dropout, softmax and the
// fused cross-entropy, casts, fills, optimizer updates, input normalization/augmentation.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/backends/cpu/cpu_ops.h"
#include "engine/core/counter_rng.h"
#include "engine/core/error.h"

namespace convoy::cpu {

namespace {

// Below this many elements a loop runs on one thread: forking costs more than it saves.
constexpr int64_t kParallelMin = 1 << 15;

int team(int threads) { return threads > 0 ? threads : omp_get_max_threads(); }

// Calls f(reader) with a reader(i) -> float over t's elements (f32, bf16 or f16).
template <class F>
void with_reader(const Tensor& t, F&& f) {
  switch (t.dtype()) {
    case DType::f32: {
      const float* p = t.data<float>();
      f([p](int64_t i) { return p[i]; });
      return;
    }
    case DType::bf16: {
      const uint16_t* p = t.data<uint16_t>();
      f([p](int64_t i) { return bf16_to_float(p[i]); });
      return;
    }
    case DType::f16: {
      const uint16_t* p = t.data<uint16_t>();
      f([p](int64_t i) { return f16_to_float(p[i]); });
      return;
    }
    case DType::i32:
    case DType::u8: break;
  }
  throw InternalError("expected a floating-point tensor, got " + std::string(dtype_name(t.dtype())));
}

// Calls f(writer) with a writer(i, float) into t's elements (f32, bf16 or f16).
template <class F>
void with_writer(Tensor& t, F&& f) {
  switch (t.dtype()) {
    case DType::f32: {
      float* p = t.data<float>();
      f([p](int64_t i, float v) { p[i] = v; });
      return;
    }
    case DType::bf16: {
      uint16_t* p = t.data<uint16_t>();
      f([p](int64_t i, float v) { p[i] = float_to_bf16(v); });
      return;
    }
    case DType::f16: {
      uint16_t* p = t.data<uint16_t>();
      f([p](int64_t i, float v) { p[i] = float_to_f16(v); });
      return;
    }
    case DType::i32:
    case DType::u8: break;
  }
  throw InternalError("expected a floating-point tensor, got " + std::string(dtype_name(t.dtype())));
}

// concat/split's elements per channel (the product of y's dims after 1), y already checked.
int64_t channel_inner(const Tensor& y) {
  int64_t inner = 1;
  for (int d = 2; d < y.ndim(); ++d) inner *= y.dim(d);
  return inner;
}

}  // namespace

// ---- elementwise ----------------------------------------------------------------------------

void CpuOps::add(const Tensor& a, const Tensor& b, Tensor& y) {
  check_add(a, b, y, Device::cpu());
  require_supported(OpKind::add, {{a, "a"}, {b, "b"}, {y, "y"}});
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* py = y.data<float>();
  const int64_t n = y.numel();
#pragma omp parallel for num_threads(team(threads_)) if (n >= kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) py[i] = pa[i] + pb[i];
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

namespace {

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

// ---- softmax and cross-entropy --------------------------------------------------------------

void CpuOps::softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float smoothing,
                                   Tensor& loss, Tensor& dlogits, Tensor& correct) {
  check_softmax_cross_entropy(logits, labels, smoothing, loss, dlogits, correct, Device::cpu());
  require_supported(OpKind::softmax_cross_entropy, {{logits, "logits"}, {dlogits, "dlogits"}});
  const int64_t n = logits.dim(0), c = logits.dim(1);
  const bool want_grad = dlogits.defined();

  const int32_t* lab = labels.data<int32_t>();
  std::atomic<int64_t> bad_row{-1};
  double total = 0.0;
  int64_t hits = 0;
  const int nt = team(threads_);
  const double on = 1.0 - smoothing, off = static_cast<double>(smoothing) / static_cast<double>(c);
  const double inv_n = 1.0 / static_cast<double>(n);
  with_reader(logits, [&](auto read) {
    auto body = [&](auto write) {
      double sum_loss = 0.0;
      int64_t sum_hits = 0;
#pragma omp parallel num_threads(nt) if (n * c >= kParallelMin)
      {
        std::vector<double> z(static_cast<size_t>(c));
#pragma omp for reduction(+ : sum_loss, sum_hits) schedule(static)
        for (int64_t row = 0; row < n; ++row) {
          const int32_t label = lab[row];
          if (label < 0 || label >= c) {
            bad_row.store(row);
            continue;
          }
          const int64_t base = row * c;
          int64_t arg = 0;
          double zmax = -std::numeric_limits<double>::infinity(), zsum = 0.0;
          for (int64_t j = 0; j < c; ++j) {
            z[j] = read(base + j);
            zsum += z[j];
            if (z[j] > zmax) {
              zmax = z[j];
              arg = j;
            }
          }
          double sum = 0.0;
          for (int64_t j = 0; j < c; ++j) sum += std::exp(z[j] - zmax);
          const double lse = zmax + std::log(sum);
          // -sum_j t_j log p_j with sum_j t_j = 1 and log p_j = z_j - lse.
          sum_loss += lse - on * z[label] - off * zsum;
          sum_hits += arg == label ? 1 : 0;
          if constexpr (!std::is_same_v<decltype(write), std::nullptr_t>) {
            for (int64_t j = 0; j < c; ++j) {
              const double target = off + (j == label ? on : 0.0);
              write(base + j, static_cast<float>((std::exp(z[j] - lse) - target) * inv_n));
            }
          }
        }
      }
      total = sum_loss;
      hits = sum_hits;
    };
    if (want_grad) with_writer(dlogits, body);
    else body(nullptr);
  });
  if (bad_row.load() >= 0) {
    const int64_t row = bad_row.load();
    throw InputError("label " + std::to_string(lab[row]) + " of sample " + std::to_string(row) +
                     " is outside [0, " + std::to_string(c) + ")");
  }
  loss.data<float>()[0] = static_cast<float>(total * inv_n);
  if (correct.defined()) correct.data<int32_t>()[0] = static_cast<int32_t>(hits);
}

void CpuOps::softmax(const Tensor& logits, Tensor& probs) {
  check_softmax(logits, probs, Device::cpu());
  require_supported(OpKind::softmax, {{logits, "logits"}, {probs, "probs"}});
  const int64_t n = logits.dim(0), c = logits.dim(1);
  const int nt = team(threads_);
  float* out = probs.data<float>();
  with_reader(logits, [&](auto read) {
#pragma omp parallel for num_threads(nt) if (n * c >= kParallelMin) schedule(static)
    for (int64_t row = 0; row < n; ++row) {
      const int64_t base = row * c;
      float zmax = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < c; ++j) zmax = std::max(zmax, read(base + j));
      double sum = 0.0;
      for (int64_t j = 0; j < c; ++j) {
        const float e = std::exp(read(base + j) - zmax);
        out[base + j] = e;
        sum += e;
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < c; ++j) out[base + j] *= inv;
    }
  });
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
  const OpCheck check("fill", Device::cpu());
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
      check.that(value == std::trunc(value) && std::abs(value) <= 2147483520.0f,
                 std::to_string(value) + " is not an I32 value");
      fill_with(y.data<int32_t>(), static_cast<int32_t>(value));
      return;
    case DType::u8:
      check.that(value == std::trunc(value) && value >= 0.0f && value <= 255.0f,
                 std::to_string(value) + " is not a U8 value");
      fill_with(y.data<uint8_t>(), static_cast<uint8_t>(value));
      return;
  }
}

// ---- optimizers -----------------------------------------------------------------------------

void CpuOps::sgd_update(std::span<const SgdSlot> slots, const SgdHyper& h) {
  // The shared check holds every backend to f32 master weights, so supports() adds nothing.
  check_sgd_update(slots, h, Device::cpu());
  int64_t total = 0;
  for (const SgdSlot& s : slots) total += s.param->numel();
  const int nt = team(threads_);
  const float lr = h.lr, mu = h.momentum;
  const bool nesterov = h.nesterov;
#pragma omp parallel num_threads(nt) if (total >= kParallelMin)
  for (const SgdSlot& s : slots) {
    float* p = s.param->data<float>();
    const float* g = s.grad->data<float>();
    float* buf = s.momentum_buf && s.momentum_buf->defined() ? s.momentum_buf->data<float>()
                                                             : nullptr;
    const float wd = s.weight_decay;
    const int64_t n = s.param->numel();
#pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < n; ++i) {
      float d = g[i] + wd * p[i];
      if (buf) {
        const float b = mu * buf[i] + d;
        buf[i] = b;
        d = nesterov ? d + mu * b : b;
      }
      p[i] -= lr * d;
    }
  }
}

void CpuOps::adamw_update(std::span<const AdamSlot> slots, const AdamHyper& h) {
  check_adamw_update(slots, h, Device::cpu());  // f32 master weights, as for SGD
  int64_t total = 0;
  for (const AdamSlot& s : slots) total += s.param->numel();
  const int nt = team(threads_);
  const double t = static_cast<double>(h.step);
  const float b1 = h.beta1, b2 = h.beta2, eps = h.eps;
  const float step_size = static_cast<float>(h.lr / (1.0 - std::pow(static_cast<double>(b1), t)));
  const float inv_sqrt_bc2 =
      static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(static_cast<double>(b2), t)));
#pragma omp parallel num_threads(nt) if (total >= kParallelMin)
  for (const AdamSlot& s : slots) {
    float* p = s.param->data<float>();
    const float* g = s.grad->data<float>();
    float* m = s.m->data<float>();
    float* v = s.v->data<float>();
    const float decay = 1.0f - h.lr * s.weight_decay;
    const int64_t n = s.param->numel();
#pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < n; ++i) {
      const float gi = g[i];
      const float mi = b1 * m[i] + (1.0f - b1) * gi;
      const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
      m[i] = mi;
      v[i] = vi;
      p[i] = p[i] * decay - step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps);
    }
  }
}

// ---- input pipeline -------------------------------------------------------------------------

void CpuOps::normalize_augment(const Tensor& images, const NormalizeAugment& a, uint64_t seed,
                               Tensor& y) {
  check_normalize_augment(images, a, y, Device::cpu());
  require_supported(OpKind::normalize_augment, {{y, "y"}});
  const int64_t n = images.dim(0), c = images.dim(1), h = images.dim(2), w = images.dim(3);
  const uint8_t* src = images.data<uint8_t>();
  const uint64_t range = static_cast<uint64_t>(2 * a.crop_padding + 1);
  const int nt = team(threads_);
  with_writer(y, [&](auto write) {
#pragma omp parallel for collapse(2) num_threads(nt) if (y.numel() >= kParallelMin) schedule(static)
    for (int64_t s = 0; s < n; ++s) {
      for (int64_t ch = 0; ch < c; ++ch) {
        const uint64_t r = counter_hash(seed, static_cast<uint64_t>(s));
        const int64_t oy = static_cast<int64_t>(r % range) - a.crop_padding;
        const int64_t ox = static_cast<int64_t>((r >> 16) % range) - a.crop_padding;
        const bool flip = a.horizontal_flip && ((r >> 32) & 1u);
        const float mean = a.mean[ch], inv_std = 1.0f / a.std[ch];
        const uint8_t* plane = src + (s * c + ch) * h * w;
        const int64_t out = (s * c + ch) * h * w;
        for (int64_t i = 0; i < h; ++i) {
          const int64_t si = i + oy;
          for (int64_t j = 0; j < w; ++j) {
            const int64_t sj = j + ox;  // column in the flipped image
            float v = 0.0f;
            if (si >= 0 && si < h && sj >= 0 && sj < w)
              v = plane[si * w + (flip ? w - 1 - sj : sj)];
            write(out + i * w + j, (v * (1.0f / 255.0f) - mean) * inv_std);
          }
        }
      }
    }
  });
}

}  // namespace convoy::cpu
