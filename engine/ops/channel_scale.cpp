#include "engine/ops/channel_scale.h"

#include "engine/ops/op_check.h"

namespace convoy {

namespace {

// x 4-D and floating, s (N, C) or (N, C, 1, 1) of its dtype: one number per (sample, channel).
const OpCheck& check_operands(const OpCheck& c, const Tensor& x, const Tensor& s) {
  c.floating(x, "x").rank(x, 4, "x").here(s, "s");
  const bool per_channel = (s.ndim() == 2 || (s.ndim() == 4 && s.dim(2) == 1 && s.dim(3) == 1)) &&
                           s.dim(0) == x.dim(0) && s.dim(1) == x.dim(1) && s.dtype() == x.dtype();
  return c.that(per_channel, [&] {
    return "s " + describe(s) + " must be (N, C) or (N, C, 1, 1) of x " + describe(x) + " and its dtype";
  });
}

}  // namespace

void check_channel_scale_forward(const Tensor& x, const Tensor& s, const Tensor& y, Device device) {
  const OpCheck c("channel_scale_forward", device);
  check_operands(c, x, s).here(y, "y").like(x, "x", y, "y");
}

void check_channel_scale_backward(const Tensor& x, const Tensor& s, const Tensor& dy, const Tensor& dx,
                                  const Tensor& ds, Device device) {
  const OpCheck c("channel_scale_backward", device);
  check_operands(c, x, s).here(dy, "dy").like(x, "x", dy, "dy");
  c.that(dx.defined() || ds.defined(), "dx and ds are both undefined: nothing to compute");
  if (dx.defined()) c.here(dx, "dx").like(x, "x", dx, "dx");
  if (ds.defined()) c.here(ds, "ds").that(ds.shape() == s.shape() && ds.dtype() == s.dtype(), [&] {
    return "ds " + describe(ds) + " must have s's shape and dtype, " + describe(s);
  });
}

}  // namespace convoy
