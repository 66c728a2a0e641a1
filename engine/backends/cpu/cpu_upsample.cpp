// upsample on oneDNN's resampling primitive (plain nchw f32): nearest and linear, whose
// coordinate rules are PyTorch's align_corners=False ones where upsample_refusal allows the
// sizes (engine/ops/upsample.h).
#include <string>

#include "engine/backends/cpu/cpu_ops.h"
#include "engine/backends/cpu/cpu_primitives.h"
#include "engine/backends/cpu/onednn_compat.h"

namespace convoy::cpu {

namespace {

dnnl::algorithm resampling_algorithm(UpsampleMode mode) {
  switch (mode) {
    case UpsampleMode::nearest: return dnnl::algorithm::resampling_nearest;
    case UpsampleMode::bilinear: return dnnl::algorithm::resampling_linear;
  }
  throw InternalError("unknown upsample mode");
}

Md plane_md(const Tensor& t) { return f32_md({t.dim(0), t.dim(1), t.dim(2), t.dim(3)}, Tag::nchw); }

std::string upsample_key(const char* op, UpsampleMode mode, const Tensor& x, const Tensor& y) {
  return key_of(op, {static_cast<int64_t>(mode), x.dim(0), x.dim(1), x.dim(2), x.dim(3), y.dim(2), y.dim(3)});
}

}  // namespace

void CpuOps::upsample_forward(UpsampleMode mode, const Tensor& x, Tensor& y) {
  constexpr const char* op = "upsample_forward";
  check_upsample_forward(mode, x, y, Device::cpu());
  require_supported(OpKind::upsample_forward, {{x, "x"}, {y, "y"}});
  const Md xd = plane_md(x), yd = plane_md(y);
  guarded(
      op, [&] { return "x " + shape_str(x.shape()) + " -> y " + shape_str(y.shape()); },
      [&] {
        const Cached& c = cached(upsample_key(op, mode, x, y), [&] {
          return Cached{dnnl::resampling_forward(onednn::resampling_forward_pd(
              engine_, dnnl::prop_kind::forward_training, resampling_algorithm(mode), xd, yd))};
        });
        execute(c, {{DNNL_ARG_SRC, wrap(xd, x)}, {DNNL_ARG_DST, wrap(yd, y)}});
      });
}

void CpuOps::upsample_backward(UpsampleMode mode, const Tensor& dy, Tensor& dx) {
  constexpr const char* op = "upsample_backward";
  check_upsample_backward(mode, dy, dx, Device::cpu());
  require_supported(OpKind::upsample_backward, {{dy, "dy"}, {dx, "dx"}});
  const Md xd = plane_md(dx), yd = plane_md(dy);
  guarded(
      op, [&] { return "dy " + shape_str(dy.shape()) + " -> dx " + shape_str(dx.shape()); },
      [&] {
        const Cached& c = cached(upsample_key(op, mode, dx, dy), [&] {
          const dnnl::algorithm alg = resampling_algorithm(mode);
          const auto hint =
              onednn::resampling_forward_pd(engine_, dnnl::prop_kind::forward_training, alg, xd, yd);
          return Cached{dnnl::resampling_backward(onednn::resampling_backward_pd(engine_, alg, xd, yd, hint))};
        });
        execute(c, {{DNNL_ARG_DIFF_DST, wrap(yd, dy)}, {DNNL_ARG_DIFF_SRC, wrap(xd, dx)}});
      });
}

}  // namespace convoy::cpu
