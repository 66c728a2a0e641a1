#include "engine/ops/upsample.h"

#include "engine/ops/op_check.h"

namespace convoy {

const char* upsample_refusal(UpsampleMode mode, int64_t in, int64_t out) {
  if (in < 1 || out < 1) return "empty input or output";
  switch (mode) {
    // PyTorch's nearest and oneDNN's pick different pixels unless each input pixel becomes a
    // whole k x k block.
    case UpsampleMode::nearest:
      return out % in == 0 ? "" : "nearest upsampling needs an output size that is a whole multiple of the input's";
    case UpsampleMode::bilinear: return "";
  }
  return "unknown upsample mode";
}

namespace {

void check_pair(const OpCheck& c, UpsampleMode mode, const Tensor& x, const char* xn, const Tensor& y, const char* yn) {
  c.floating(x, xn).here(y, yn);
  c.that(x.ndim() == 4 && y.ndim() == 4,
         [&] { return "expected 4-D tensors, got " + describe(x) + ", " + describe(y); });
  c.that(x.dim(0) == y.dim(0) && x.dim(1) == y.dim(1),
         [&] { return describe(x) + " and " + describe(y) + " differ in batch or channels"; });
  c.that(x.dtype() == y.dtype() && x.layout() == y.layout(),
         [&] { return describe(x) + " and " + describe(y) + " must share dtype and layout"; });
  for (int d = 2; d < 4; ++d) {
    const std::string why = upsample_refusal(mode, x.dim(d), y.dim(d));
    c.that(why.empty(), [&] { return why + ": " + describe(x) + " -> " + describe(y); });
  }
}

}  // namespace

void check_upsample_forward(UpsampleMode mode, const Tensor& x, const Tensor& y, Device device) {
  check_pair(OpCheck("upsample_forward", device), mode, x, "x", y, "y");
}

void check_upsample_backward(UpsampleMode mode, const Tensor& dy, const Tensor& dx, Device device) {
  check_pair(OpCheck("upsample_backward", device), mode, dx, "dx", dy, "dy");
}

}  // namespace convoy
