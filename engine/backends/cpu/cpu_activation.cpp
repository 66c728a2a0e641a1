// activation on oneDNN's eltwise primitives over the flat tensor: each kind's algorithm (and,
// for hardsigmoid, an affine eltwise_linear after it) from onednn_activation.h.
#include <string>

#include "engine/backends/cpu/cpu_ops.h"
#include "engine/backends/cpu/cpu_primitives.h"
#include "engine/backends/cpu/onednn_activation.h"
#include "engine/backends/cpu/onednn_compat.h"
#include "engine/core/error.h"

namespace convoy::cpu {

namespace {

using dnnl::algorithm;
using dnnl::prop_kind;

// The cache key of an activation's primitive: everything in `a` that shapes it.
std::string activation_key(const char* op, Activation kind, const OnednnActivation& a, int64_t n) {
  return key_of(op, {static_cast<int64_t>(kind), float_bits(a.alpha), float_bits(a.beta), n});
}

}  // namespace

void CpuOps::activation_forward(Activation kind, float alpha, const Tensor& x, Tensor& y) {
  constexpr const char* op = "activation_forward";
  check_activation_forward(x, y, Device::cpu());
  require_supported(OpKind::activation_forward, {{x, "x"}, {y, "y"}});
  if (x.numel() == 0) return;
  const Md md = f32_md({x.numel()}, Tag::a);
  const OnednnActivation a = onednn_activation(kind, alpha);
  guarded(
      op, [&] { return "x " + shape_str(x.shape()); },
      [&] {
        const Cached& c = cached(activation_key(op, kind, a, x.numel()), [&] {
          return Cached{dnnl::eltwise_forward(
              onednn::eltwise_forward_pd(engine_, prop_kind::forward_training, a.alg, md, a.alpha, a.beta))};
        });
        execute(c, {{DNNL_ARG_SRC, wrap(md, x)}, {DNNL_ARG_DST, wrap(md, y)}});
        if (!a.affine()) return;
        // y = scale * y + shift in place (looked up after the first ran: a lookup may empty the cache).
        const Cached& tail = cached(key_of("activation_affine", {float_bits(a.scale), float_bits(a.shift), x.numel()}), [&] {
          return Cached{dnnl::eltwise_forward(onednn::eltwise_forward_pd(
              engine_, prop_kind::forward_training, algorithm::eltwise_linear, md, a.scale, a.shift))};
        });
        execute(tail, {{DNNL_ARG_SRC, wrap(md, y)}, {DNNL_ARG_DST, wrap(md, y)}});
      });
}

void CpuOps::activation_backward(Activation kind, float alpha, const Tensor& x, const Tensor& y,
                                 const Tensor& dy, Tensor& dx) {
  constexpr const char* op = "activation_backward";
  check_activation_backward(kind, alpha, x, y, dy, dx, Device::cpu());
  // oneDNN's eltwise backward reads x (the *_use_dst_for_bwd algorithms, which read y, are
  // not used), so x is needed even where the shared check would settle for y.
  if (!x.defined()) OpCheck(op, Device::cpu()).fail("x is undefined; the CPU path reads x, not y");
  require_supported(OpKind::activation_backward, {{x, "x"}, {dy, "dy"}, {dx, "dx"}});
  if (x.numel() == 0) return;
  const Md md = f32_md({x.numel()}, Tag::a);
  const OnednnActivation a = onednn_activation(kind, alpha);
  guarded(
      op, [&] { return "x " + shape_str(x.shape()); },
      [&] {
        const Cached& c = cached(activation_key(op, kind, a, x.numel()), [&] {
          const auto hint =
              onednn::eltwise_forward_pd(engine_, prop_kind::forward_training, a.alg, md, a.alpha, a.beta);
          return Cached{
              dnnl::eltwise_backward(onednn::eltwise_backward_pd(engine_, a.alg, md, md, a.alpha, a.beta, hint))};
        });
        execute(c, {{DNNL_ARG_SRC, wrap(md, x)}, {DNNL_ARG_DIFF_DST, wrap(md, dy)}, {DNNL_ARG_DIFF_SRC, wrap(md, dx)}});
        if (!a.affine()) return;
        // d(scale * f + shift) = scale * df: dx *= scale in place.
        const Cached& tail = cached(key_of("activation_affine", {float_bits(a.scale), 0, x.numel()}), [&] {
          return Cached{dnnl::eltwise_forward(onednn::eltwise_forward_pd(
              engine_, prop_kind::forward_training, algorithm::eltwise_linear, md, a.scale, 0.0f))};
        });
        execute(tail, {{DNNL_ARG_SRC, wrap(md, dx)}, {DNNL_ARG_DST, wrap(md, dx)}});
      });
}

}  // namespace convoy::cpu
