#include "engine/ops/pool2d.h"

#include "engine/ops/conv2d.h"
#include "engine/ops/op_check.h"

namespace convoy {

Shape pool2d_output_shape(const Pool2dParams& p, const Shape& x) {
  // A pooling window is a convolution window with dilation 1 (0 where it does not fit).
  return {x[0], x[1], conv2d_output_size(x[2], p.kernel_h, p.stride_h, p.pad_h, 1),
          conv2d_output_size(x[3], p.kernel_w, p.stride_w, p.pad_w, 1)};
}

namespace {

void check_geometry(const OpCheck& c, const Pool2dParams& p, const Tensor& x, const Tensor& y) {
  c.floating(x, "x").here(y, "y");
  c.that(x.ndim() == 4 && y.ndim() == 4,
         [&] { return "expected 4-D x and y, got " + describe(x) + ", " + describe(y); });
  c.that(p.kernel_h >= 1 && p.kernel_w >= 1 && p.stride_h >= 1 && p.stride_w >= 1 && p.pad_h >= 0 &&
             p.pad_w >= 0,
         "invalid kernel, stride or padding");
  const Shape expected = pool2d_output_shape(p, x.shape());
  c.that(y.shape() == expected, [&] {
    return "output " + describe(y) + " should be " + shape_str(expected) + " for input " + describe(x);
  });
  c.that(x.dtype() == y.dtype() && x.layout() == y.layout(),
         [&] { return "x " + describe(x) + " and y " + describe(y) + " must share dtype and layout"; });
}

}  // namespace

void check_pool2d_forward(const Pool2dParams& p, const Tensor& x, const Tensor& y, Device device) {
  check_geometry(OpCheck("pool2d_forward", device), p, x, y);
}

void check_pool2d_backward(const Pool2dParams& p, const Tensor& x, const Tensor& y, const Tensor& dy,
                           const Tensor& dx, Device device) {
  const OpCheck c("pool2d_backward", device);
  check_geometry(c, p, x, dy);
  c.here(dx, "dx").like(x, "x", dx, "dx");
  if (y.defined()) c.here(y, "y").like(dy, "dy", y, "y");
}

}  // namespace convoy
