#include "engine/ops/activation_check.h"
#include "engine/ops/op_check.h"

namespace convoy {

void check_activation_forward(const Tensor& x, const Tensor& y, Device device) {
  OpCheck("activation_forward", device).floating(x, "x").here(y, "y").like(x, "x", y, "y");
}

void check_activation_backward(Activation kind, float alpha, const Tensor& x, const Tensor& y,
                               const Tensor& dy, const Tensor& dx, Device device) {
  const bool reads_x = x.defined() || !activation_backward_reads_output(kind, alpha);
  const Tensor& in = reads_x ? x : y;
  const char* in_name = reads_x ? "x" : "y";
  OpCheck("activation_backward", device)
      .floating(in, in_name)
      .here(dy, "dy")
      .here(dx, "dx")
      .like(in, in_name, dy, "dy")
      .like(in, in_name, dx, "dx");
}

}  // namespace convoy
