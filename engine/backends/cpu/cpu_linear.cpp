// linear on oneDNN's inner product: forward, backward data and backward weights (nc, oi).
#include <string>

#include "engine/backends/cpu/cpu_ops.h"
#include "engine/backends/cpu/cpu_primitives.h"
#include "engine/backends/cpu/onednn_compat.h"
#include "engine/core/error.h"

namespace convoy::cpu {

namespace {

using dnnl::prop_kind;

struct LinearDescs {
  Md x, w, b, y;  // x (N, K), w (M, K), b (M), y (N, M)
};

LinearDescs linear_descs(int64_t n, int64_t k, int64_t m) {
  return {f32_md({n, k}, Tag::nc), f32_md({m, k}, Tag::oi), f32_md({m}, Tag::a),
          f32_md({n, m}, Tag::nc)};
}

// What oneDNN needs beyond check_linear_*: non-empty x (N, K) and w (M, K), already checked.
void linear_nonempty(const char* op, const Tensor& x, const Tensor& w) {
  if (x.numel() == 0 || w.numel() == 0)
    OpCheck(op, Device::cpu()).fail("empty tensor: x " + describe(x) + ", w " + describe(w));
}

}  // namespace

void CpuOps::linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  constexpr const char* op = "linear_forward";
  check_linear_forward(x, w, b, y, Device::cpu());
  require_supported(OpKind::linear_forward, {{x, "x"}, {w, "w"}, {b, "b"}, {y, "y"}});
  linear_nonempty(op, x, w);
  const int64_t n = x.dim(0), k = x.dim(1), m = w.dim(0);
  const bool bias = b.defined();
  const LinearDescs d = linear_descs(n, k, m);
  guarded(
      op, [&] { return "x " + shape_str(x.shape()) + ", w " + shape_str(w.shape()); },
      [&] {
        const Cached& c = cached(key_of(op, {n, k, m, bias ? 1 : 0}), [&] {
          return Cached{dnnl::inner_product_forward(onednn::inner_product_forward_pd(
              engine_, prop_kind::forward_training, d.x, d.w, bias ? &d.b : nullptr, d.y))};
        });
        std::unordered_map<int, dnnl::memory> args{
            {DNNL_ARG_SRC, wrap(d.x, x)}, {DNNL_ARG_WEIGHTS, wrap(d.w, w)}, {DNNL_ARG_DST, wrap(d.y, y)}};
        if (bias) args.emplace(DNNL_ARG_BIAS, wrap(d.b, b));
        execute(c, args);
      });
}

void CpuOps::linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
                             Tensor& dw, Tensor& db) {
  constexpr const char* op = "linear_backward";
  check_linear_backward(x, w, dy, dx, dw, db, Device::cpu());
  require_supported(OpKind::linear_backward,
                    {{x, "x"}, {w, "w"}, {dy, "dy"}, {dx, "dx"}, {dw, "dw"}, {db, "db"}});
  linear_nonempty(op, x, w);
  const int64_t n = x.dim(0), k = x.dim(1), m = w.dim(0);
  const bool bias = db.defined();
  const LinearDescs d = linear_descs(n, k, m);
  guarded(
      op, [&] { return "x " + shape_str(x.shape()) + ", w " + shape_str(w.shape()) + ", dy " + shape_str(dy.shape()); },
      [&] {
        if (dx.defined()) {
          const Cached& c = cached(key_of("linear_backward_data", {n, k, m}), [&] {
            const auto hint = onednn::inner_product_forward_pd(
                engine_, prop_kind::forward_training, d.x, d.w, nullptr, d.y);
            return Cached{dnnl::inner_product_backward_data(
                onednn::inner_product_backward_data_pd(engine_, d.x, d.w, d.y, hint))};
          });
          execute(c, {{DNNL_ARG_DIFF_DST, wrap(d.y, dy)},
                      {DNNL_ARG_WEIGHTS, wrap(d.w, w)},
                      {DNNL_ARG_DIFF_SRC, wrap(d.x, dx)}});
        }
        const Cached& c = cached(key_of("linear_backward_weights", {n, k, m, bias ? 1 : 0}), [&] {
          const auto hint = onednn::inner_product_forward_pd(
              engine_, prop_kind::forward_training, d.x, d.w, bias ? &d.b : nullptr, d.y);
          return Cached{dnnl::inner_product_backward_weights(
              onednn::inner_product_backward_weights_pd(engine_, d.x, d.w, bias ? &d.b : nullptr,
                                                        d.y, hint))};
        });
        std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, wrap(d.x, x)},
                                                   {DNNL_ARG_DIFF_DST, wrap(d.y, dy)},
                                                   {DNNL_ARG_DIFF_WEIGHTS, wrap(d.w, dw)}};
        if (bias) args.emplace(DNNL_ARG_DIFF_BIAS, wrap(d.b, db));
        execute(c, args);
      });
}

}  // namespace convoy::cpu
