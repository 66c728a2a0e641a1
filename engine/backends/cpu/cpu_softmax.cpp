// softmax and the fused softmax cross-entropy with label smoothing as OpenMP loops; the logits
// are read in any floating dtype and the math is done in double. The softmax layer's softmax
// over channels is oneDNN's (softmax_accurate along axis 1), as the inference plans run it.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/backends/cpu/cpu_loops.h"
#include "engine/backends/cpu/cpu_ops.h"
#include "engine/backends/cpu/cpu_primitives.h"
#include "engine/backends/cpu/onednn_compat.h"
#include "engine/core/error.h"

namespace convoy::cpu {

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

namespace {

// x (N, C) or (N, C, H, W), plain.
Md channel_md(const Tensor& t) {
  if (t.ndim() == 2) return f32_md({t.dim(0), t.dim(1)}, Tag::nc);
  return f32_md({t.dim(0), t.dim(1), t.dim(2), t.dim(3)}, Tag::nchw);
}

std::string channel_key(const char* op, const Tensor& t) {
  return key_of(op, {t.ndim(), t.dim(0), t.dim(1), t.ndim() == 4 ? t.dim(2) : 1, t.ndim() == 4 ? t.dim(3) : 1});
}

}  // namespace

void CpuOps::channel_softmax_forward(const Tensor& x, Tensor& y) {
  constexpr const char* op = "channel_softmax_forward";
  check_channel_softmax_forward(x, y, Device::cpu());
  require_supported(OpKind::channel_softmax_forward, {{x, "x"}, {y, "y"}});
  const Md md = channel_md(x);
  guarded(
      op, [&] { return "x " + shape_str(x.shape()); },
      [&] {
        const Cached& c = cached(channel_key(op, x), [&] {
          return Cached{onednn::SoftmaxForward(
              onednn::softmax_forward_pd(engine_, dnnl::prop_kind::forward_training, md, md, 1))};
        });
        execute(c, {{DNNL_ARG_SRC, wrap(md, x)}, {DNNL_ARG_DST, wrap(md, y)}});
      });
}

void CpuOps::channel_softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  constexpr const char* op = "channel_softmax_backward";
  check_channel_softmax_backward(y, dy, dx, Device::cpu());
  require_supported(OpKind::channel_softmax_backward, {{y, "y"}, {dy, "dy"}, {dx, "dx"}});
  const Md md = channel_md(y);
  guarded(
      op, [&] { return "y " + shape_str(y.shape()); },
      [&] {
        const Cached& c = cached(channel_key(op, y), [&] {
          const auto hint = onednn::softmax_forward_pd(engine_, dnnl::prop_kind::forward_training, md, md, 1);
          return Cached{onednn::SoftmaxBackward(onednn::softmax_backward_pd(engine_, md, md, md, 1, hint))};
        });
        execute(c, {{DNNL_ARG_DST, wrap(md, y)}, {DNNL_ARG_DIFF_DST, wrap(md, dy)}, {DNNL_ARG_DIFF_SRC, wrap(md, dx)}});
      });
}

}  // namespace convoy::cpu
