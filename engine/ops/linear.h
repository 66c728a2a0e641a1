#pragma once
// linear: y = x w^T + b (PyTorch's Linear).
#include "engine/core/tensor.h"

namespace convoy {

// x (N, K), w (M, K), b (M) or undefined, y (N, M). InternalError on failure.
void check_linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y, Device device);
// dy (N, M) -> dx (N, K) unless undefined, dw (M, K), db (M) unless undefined.
void check_linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& dx,
                           const Tensor& dw, const Tensor& db, Device device);

}  // namespace convoy
