#pragma once
// Argument checks of the activation ops (activation.h holds the enum, for the kernels too).
#include "engine/core/tensor.h"
#include "engine/ops/activation.h"

namespace convoy {

void check_activation_forward(const Tensor& x, const Tensor& y, Device device);
// x may be undefined when activation_backward_reads_output(kind, alpha); then y is read.
void check_activation_backward(Activation kind, float alpha, const Tensor& x, const Tensor& y,
                               const Tensor& dy, const Tensor& dx, Device device);

}  // namespace convoy
