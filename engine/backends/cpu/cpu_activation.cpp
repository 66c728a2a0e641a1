// activation on oneDNN's eltwise primitives: relu, leaky relu and gelu over the flat tensor.
#include <string>

#include "engine/backends/cpu/cpu_ops.h"
#include "engine/backends/cpu/cpu_primitives.h"
#include "engine/backends/cpu/onednn_compat.h"
#include "engine/core/error.h"

namespace convoy::cpu {

namespace {

using dnnl::algorithm;
using dnnl::prop_kind;

algorithm eltwise_alg(Activation kind) {
  switch (kind) {
    case Activation::relu:
    case Activation::leaky_relu: return algorithm::eltwise_relu;  // alpha = negative slope
    case Activation::gelu: return algorithm::eltwise_gelu_erf;
  }
  throw InternalError("unknown activation");
}

float eltwise_alpha(Activation kind, float alpha) {
  return kind == Activation::leaky_relu ? alpha : 0.0f;
}

}  // namespace

void CpuOps::activation_forward(Activation kind, float alpha, const Tensor& x, Tensor& y) {
  constexpr const char* op = "activation_forward";
  check_activation_forward(x, y, Device::cpu());
  require_supported(OpKind::activation_forward, {{x, "x"}, {y, "y"}});
  if (x.numel() == 0) return;
  const Md md = f32_md({x.numel()}, Tag::a);
  const float a = eltwise_alpha(kind, alpha);
  guarded(
      op, [&] { return "x " + shape_str(x.shape()); },
      [&] {
        const Cached& c = cached(
            key_of(op, {static_cast<int64_t>(kind), float_bits(a), x.numel()}), [&] {
              return Cached{dnnl::eltwise_forward(onednn::eltwise_forward_pd(
                  engine_, prop_kind::forward_training, eltwise_alg(kind), md, a, 0.0f))};
            });
        execute(c, {{DNNL_ARG_SRC, wrap(md, x)}, {DNNL_ARG_DST, wrap(md, y)}});
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
  const float a = eltwise_alpha(kind, alpha);
  guarded(
      op, [&] { return "x " + shape_str(x.shape()); },
      [&] {
        const Cached& c = cached(
            key_of(op, {static_cast<int64_t>(kind), float_bits(a), x.numel()}), [&] {
              const auto hint = onednn::eltwise_forward_pd(engine_, prop_kind::forward_training,
                                                           eltwise_alg(kind), md, a, 0.0f);
              return Cached{dnnl::eltwise_backward(
                  onednn::eltwise_backward_pd(engine_, eltwise_alg(kind), md, md, a, 0.0f, hint))};
            });
        execute(c, {{DNNL_ARG_SRC, wrap(md, x)},
                    {DNNL_ARG_DIFF_DST, wrap(md, dy)},
                    {DNNL_ARG_DIFF_SRC, wrap(md, dx)}});
      });
}

}  // namespace convoy::cpu
