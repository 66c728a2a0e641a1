#include "engine/ops/conv2d.h"

#include "engine/ops/op_check.h"

namespace convoy {

Shape conv2d_output_shape(const Conv2dParams& p, const Shape& x, const Shape& w) {
  return {x[0], w[0], conv2d_output_size(x[2], w[2], p.stride_h, p.pad_h, p.dilation_h),
          conv2d_output_size(x[3], w[3], p.stride_w, p.pad_w, p.dilation_w)};
}

namespace {

// x (N, C, H, W), w (K, C/g, R, S), y (N, K, P, Q): one floating dtype, shapes that fit.
void check_geometry(const OpCheck& c, const Conv2dParams& p, const Tensor& x, const Tensor& w,
                    const Tensor& y) {
  c.floating(x, "x").floating(w, "w").floating(y, "y");
  c.that(x.ndim() == 4 && w.ndim() == 4 && y.ndim() == 4, [&] {
    return "expected 4-D tensors, got x " + describe(x) + ", w " + describe(w) + ", y " + describe(y);
  });
  c.that(x.dtype() == w.dtype() && x.dtype() == y.dtype(), [&] {
    return "x, w and y must share one floating dtype, got " + describe(x) + ", " + describe(w) + ", " +
           describe(y);
  });
  c.that(p.stride_h >= 1 && p.stride_w >= 1 && p.dilation_h >= 1 && p.dilation_w >= 1 &&
             p.pad_h >= 0 && p.pad_w >= 0,
         "invalid stride, padding or dilation");
  const int64_t groups = p.groups;
  c.that(groups >= 1 && x.dim(1) % groups == 0 && w.dim(0) % groups == 0 && w.dim(1) == x.dim(1) / groups,
         [&] {
           return "weights " + describe(w) + " do not fit input " + describe(x) + " with groups " +
                  std::to_string(groups);
         });
  const Shape expected = conv2d_output_shape(p, x.shape(), w.shape());
  c.that(y.shape() == expected, [&] {
    return "output " + describe(y) + " should be " + shape_str(expected) + " for input " + describe(x) +
           " and weights " + describe(w);
  });
}

}  // namespace

void check_conv2d_forward(const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& b,
                          const Tensor& y, Device device) {
  const OpCheck c("conv2d_forward", device);
  check_geometry(c, p, x, w, y);
  if (b.defined())
    c.floating(b, "b").that(b.numel() == y.dim(1),
                            [&] { return "bias " + describe(b) + " does not match output " + describe(y); });
}

void check_conv2d_backward_data(const Conv2dParams& p, const Tensor& dy, const Tensor& w,
                                const Tensor& dx, Device device) {
  check_geometry(OpCheck("conv2d_backward_data", device), p, dx, w, dy);
}

void check_conv2d_backward_weights(const Conv2dParams& p, const Tensor& x, const Tensor& dy,
                                   const Tensor& dw, const Tensor& db, Device device) {
  const OpCheck c("conv2d_backward_weights", device);
  check_geometry(c, p, x, dw, dy);
  if (db.defined())
    c.floating(db, "db").that(db.numel() == dy.dim(1),
                              [&] { return "db " + describe(db) + " does not match dy " + describe(dy); });
}

}  // namespace convoy
