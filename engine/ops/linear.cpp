#include "engine/ops/linear.h"

#include "engine/ops/op_check.h"

namespace convoy {

namespace {

// x (N, K), w (M, K), y (N, M) in one floating dtype.
void check_geometry(const OpCheck& c, const Tensor& x, const Tensor& w, const Tensor& y, const char* y_name) {
  c.floating(x, "x").floating(w, "w").floating(y, y_name);
  c.that(x.ndim() == 2 && w.ndim() == 2 && y.ndim() == 2 && w.dim(1) == x.dim(1) && y.dim(0) == x.dim(0) &&
             y.dim(1) == w.dim(0),
         [&] {
           return std::string("expected x (N, K), w (M, K), ") + y_name + " (N, M), got " + describe(x) +
                  ", " + describe(w) + ", " + describe(y);
         });
  c.that(x.dtype() == w.dtype() && x.dtype() == y.dtype(),
         [&] { return std::string("x, w and ") + y_name + " must share one dtype"; });
}

}  // namespace

void check_linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y, Device device) {
  const OpCheck c("linear_forward", device);
  check_geometry(c, x, w, y, "y");
  if (b.defined())
    c.floating(b, "b").that(b.numel() == w.dim(0),
                            [&] { return "bias " + describe(b) + " does not match w " + describe(w); });
}

void check_linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& dx,
                           const Tensor& dw, const Tensor& db, Device device) {
  const OpCheck c("linear_backward", device);
  check_geometry(c, x, w, dy, "dy");
  c.floating(dw, "dw").like(w, "w", dw, "dw");
  if (dx.defined()) c.here(dx, "dx").like(x, "x", dx, "dx");
  if (db.defined())
    c.floating(db, "db").that(db.numel() == w.dim(0),
                              [&] { return "db " + describe(db) + " does not match dy " + describe(dy); });
}

}  // namespace convoy
