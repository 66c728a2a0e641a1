// conv2d on oneDNN: forward, backward data, backward weights. Plain formats (nchw, oihw or
// goihw) so tensors are used in place with no reorders.
#include <string>

#include "engine/backends/cpu/cpu_ops.h"
#include "engine/backends/cpu/cpu_primitives.h"
#include "engine/backends/cpu/onednn_compat.h"
#include "engine/core/error.h"

namespace convoy::cpu {

namespace {

using dnnl::prop_kind;

struct ConvGeom {
  int64_t n, c, h, w;  // x (N, C, H, W)
  int64_t k, r, s;     // w (K, C/groups, R, S)
  int64_t p, q;        // y (N, K, P, Q)
  int64_t groups;
};

std::string conv_str(const Conv2dParams& p) {
  return "stride (" + std::to_string(p.stride_h) + ", " + std::to_string(p.stride_w) + "), pad (" +
         std::to_string(p.pad_h) + ", " + std::to_string(p.pad_w) + "), dilation (" +
         std::to_string(p.dilation_h) + ", " + std::to_string(p.dilation_w) + "), groups " +
         std::to_string(p.groups);
}

// What oneDNN needs beyond check_conv2d_*: non-empty tensors and a kernel that fits the
// padded input. (conv2d_output_size rounds a negative span toward zero, so a kernel that
// overhangs by less than a stride passes the shared shape check with P = 1; at stride 1 the
// formula is exact.) x (N, C, H, W), w (K, C/groups, R, S), y (N, K, P, Q), already checked.
// The messages are built only on failure: this runs on every call.
ConvGeom conv_geom(const char* op, const Conv2dParams& p, const Tensor& x, const Tensor& w,
                   const Tensor& y) {
  const OpCheck c(op, Device::cpu());
  if (x.dim(0) < 1 || x.dim(1) < 1 || w.dim(0) < 1)
    c.fail("empty tensor: x " + describe(x) + ", w " + describe(w));
  if (conv2d_output_size(x.dim(2), w.dim(2), 1, p.pad_h, p.dilation_h) < 1 ||
      conv2d_output_size(x.dim(3), w.dim(3), 1, p.pad_w, p.dilation_w) < 1)
    c.fail("the kernel of " + describe(w) + " does not fit the padded input " + describe(x) +
           ", " + conv_str(p));
  return {x.dim(0), x.dim(1), x.dim(2), x.dim(3), w.dim(0), w.dim(2), w.dim(3),
          y.dim(2), y.dim(3), p.groups};
}

struct ConvDescs {
  Md x, w, b, y;  // x (N, C, H, W), w (K, C/groups, R, S), b (K), y (N, K, P, Q)
  Dims strides, dilates, pad_l, pad_r;
};

ConvDescs conv_descs(const ConvGeom& g, const Conv2dParams& p) {
  ConvDescs d;
  d.x = f32_md({g.n, g.c, g.h, g.w}, Tag::nchw);
  d.w = g.groups == 1 ? f32_md({g.k, g.c, g.r, g.s}, Tag::oihw)
                      : f32_md({g.groups, g.k / g.groups, g.c / g.groups, g.r, g.s}, Tag::goihw);
  d.b = f32_md({g.k}, Tag::a);
  d.y = f32_md({g.n, g.k, g.p, g.q}, Tag::nchw);
  d.strides = {p.stride_h, p.stride_w};
  d.dilates = {p.dilation_h - 1, p.dilation_w - 1};  // oneDNN counts the holes
  d.pad_l = {p.pad_h, p.pad_w};
  // P was checked against the symmetric formula (conv2d_output_shape), so the same right
  // padding is consistent.
  d.pad_r = {p.pad_h, p.pad_w};
  return d;
}

std::string conv_key(const char* op, const ConvGeom& g, const Conv2dParams& p, bool bias) {
  return key_of(op, {g.n, g.c, g.h, g.w, g.k, g.r, g.s, g.p, g.q, g.groups, p.stride_h, p.stride_w,
                     p.pad_h, p.pad_w, p.dilation_h, p.dilation_w, bias ? 1 : 0});
}

dnnl::convolution_forward::primitive_desc conv_forward_pd(const dnnl::engine& eng,
                                                          const ConvDescs& d, bool bias) {
  return onednn::conv_forward_pd(eng, prop_kind::forward_training, d.x, d.w, bias ? &d.b : nullptr,
                                 d.y, d.strides, d.dilates, d.pad_l, d.pad_r);
}

}  // namespace

void CpuOps::conv2d_forward(const Conv2dParams& p, const Tensor& x, const Tensor& w,
                            const Tensor& b, Tensor& y) {
  constexpr const char* op = "conv2d_forward";
  check_conv2d_forward(p, x, w, b, y, Device::cpu());
  require_supported(OpKind::conv2d_forward, {{x, "x"}, {w, "w"}, {b, "b"}, {y, "y"}});
  const ConvGeom g = conv_geom(op, p, x, w, y);
  const bool bias = b.defined();
  const ConvDescs d = conv_descs(g, p);
  guarded(
      op, [&] { return "x " + shape_str(x.shape()) + ", w " + shape_str(w.shape()) + ", " + conv_str(p); },
      [&] {
        const Cached& c = cached(conv_key(op, g, p, bias), [&] {
          return Cached{dnnl::convolution_forward(conv_forward_pd(engine_, d, bias))};
        });
        std::unordered_map<int, dnnl::memory> args{
            {DNNL_ARG_SRC, wrap(d.x, x)}, {DNNL_ARG_WEIGHTS, wrap(d.w, w)}, {DNNL_ARG_DST, wrap(d.y, y)}};
        if (bias) args.emplace(DNNL_ARG_BIAS, wrap(d.b, b));
        execute(c, args);
      });
}

bool CpuOps::conv2d_forward_fused(const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& b,
                                  const Tensor* residual, bool relu, Tensor& y) {
  conv2d_forward(p, x, w, b, y);
  if (residual)
    add(y, *residual, y, relu);
  else if (relu)
    activation_forward(Activation::relu, 0.f, y, y);
  return true;
}

void CpuOps::conv2d_backward_data(const Conv2dParams& p, const Tensor& dy, const Tensor& w,
                                  Tensor& dx, bool accumulate) {
  constexpr const char* op = "conv2d_backward_data";
  check_conv2d_backward_data(p, dy, w, dx, Device::cpu());
  if (accumulate) {  // oneDNN's data gradient has no sum post-op: into a temporary, then added
    Tensor part(dx.shape(), dx.dtype(), cpu_allocator(), dx.layout());
    conv2d_backward_data(p, dy, w, part);
    add_inplace(dx, part);
    return;
  }
  require_supported(OpKind::conv2d_backward_data, {{dy, "dy"}, {w, "w"}, {dx, "dx"}});
  const ConvGeom g = conv_geom(op, p, dx, w, dy);
  const ConvDescs d = conv_descs(g, p);
  guarded(
      op, [&] { return "dy " + shape_str(dy.shape()) + ", w " + shape_str(w.shape()) + ", dx " + shape_str(dx.shape()) + ", " + conv_str(p); },
      [&] {
        const Cached& c = cached(conv_key(op, g, p, false), [&] {
          const auto hint = conv_forward_pd(engine_, d, false);
          return Cached{dnnl::convolution_backward_data(onednn::conv_backward_data_pd(
              engine_, d.x, d.w, d.y, d.strides, d.dilates, d.pad_l, d.pad_r, hint))};
        });
        execute(c, {{DNNL_ARG_DIFF_DST, wrap(d.y, dy)},
                    {DNNL_ARG_WEIGHTS, wrap(d.w, w)},
                    {DNNL_ARG_DIFF_SRC, wrap(d.x, dx)}});
      });
}

void CpuOps::conv2d_backward_weights(const Conv2dParams& p, const Tensor& x, const Tensor& dy,
                                     Tensor& dw, Tensor& db) {
  constexpr const char* op = "conv2d_backward_weights";
  check_conv2d_backward_weights(p, x, dy, dw, db, Device::cpu());
  require_supported(OpKind::conv2d_backward_weights,
                    {{x, "x"}, {dy, "dy"}, {dw, "dw"}, {db, "db"}});
  const ConvGeom g = conv_geom(op, p, x, dw, dy);
  const bool bias = db.defined();
  const ConvDescs d = conv_descs(g, p);
  guarded(
      op, [&] { return "x " + shape_str(x.shape()) + ", dy " + shape_str(dy.shape()) + ", dw " + shape_str(dw.shape()) + ", " + conv_str(p); },
      [&] {
        const Cached& c = cached(conv_key(op, g, p, bias), [&] {
          const auto hint = conv_forward_pd(engine_, d, bias);
          return Cached{dnnl::convolution_backward_weights(onednn::conv_backward_weights_pd(
              engine_, d.x, d.w, bias ? &d.b : nullptr, d.y, d.strides, d.dilates, d.pad_l,
              d.pad_r, hint))};
        });
        std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, wrap(d.x, x)},
                                                   {DNNL_ARG_DIFF_DST, wrap(d.y, dy)},
                                                   {DNNL_ARG_DIFF_WEIGHTS, wrap(d.w, dw)}};
        if (bias) args.emplace(DNNL_ARG_DIFF_BIAS, wrap(d.b, db));
        execute(c, args);
      });
}

}  // namespace convoy::cpu
