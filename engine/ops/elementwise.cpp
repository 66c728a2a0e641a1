#include "engine/ops/elementwise.h"

#include "engine/ops/op_check.h"

namespace convoy {

void check_add(const Tensor& a, const Tensor& b, const Tensor& y, Device device) {
  OpCheck("add", device).floating(a, "a").here(b, "b").here(y, "y").like(a, "a", b, "b").like(a, "a", y, "y");
}

void check_add_inplace(const Tensor& y, const Tensor& x, Device device) {
  OpCheck("add_inplace", device).floating(y, "y").here(x, "x").like(y, "y", x, "x");
}

void check_concat_channels(const char* op, std::span<const Tensor* const> xs, const Tensor& y, Device device) {
  const OpCheck c(op, device);
  c.here(y, "y").that(y.ndim() >= 2, [&] { return "y must have a channel dimension, got " + describe(y); });
  int64_t channels = 0;
  for (const Tensor* x : xs) {
    c.here(*x, "input");
    bool stacks = x->ndim() == y.ndim() && x->dtype() == y.dtype() && x->layout() == y.layout();
    for (int64_t i = 0; stacks && i < y.ndim(); ++i) stacks = i == 1 || x->dim(i) == y.dim(i);
    c.that(stacks, [&] { return describe(*x) + " does not stack along channels into " + describe(y); });
    channels += x->dim(1);
  }
  c.that(channels == y.dim(1), [&] {
    return "the inputs' channels add up to " + std::to_string(channels) + ", not " + describe(y);
  });
}

void check_dropout(const char* op, float p, const Tensor& x, const Tensor& y, Device device) {
  OpCheck(op, device)
      .floating(x, "x")
      .here(y, "y")
      .like(x, "x", y, "y")
      .that(p >= 0.f && p <= 1.f, [&] { return "p must lie in [0, 1], got " + std::to_string(p); });
}

void check_cast(const Tensor& x, const Tensor& y, Device device) {
  OpCheck("cast", device)
      .floating(x, "x")
      .floating(y, "y")
      .that(x.shape() == y.shape() && (x.layout() == y.layout() || x.ndim() == 4), [&] {
        return "x " + describe(x) + " and y " + describe(y) +
               " must have the same shape, and the same layout unless 4-D";
      });
}

void check_fill(const Tensor& y, Device device) { OpCheck("fill", device).here(y, "y"); }

}  // namespace convoy
