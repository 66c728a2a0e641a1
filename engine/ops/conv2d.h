#pragma once
// conv2d: cross-correlation with stride, padding, dilation and groups (PyTorch's Conv2d).
#include <cstdint>

#include "engine/core/tensor.h"

namespace convoy {

struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
};

// One spatial output size; <= 0 when the kernel does not fit the padded input.
inline int64_t conv2d_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                                  int64_t dilation) {
  // The span the window's first position can move over; negative when it overhangs the padded
  // input, where C++'s division toward zero would still give one output.
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}
// x (N, C, H, W), w (K, C/groups, R, S) -> y (N, K, P, Q).
Shape conv2d_output_shape(const Conv2dParams& p, const Shape& x, const Shape& w);

// Argument checks for a backend on `device` (InternalError on failure). Biases and weight
// gradients (b, db) may be undefined.
void check_conv2d_forward(const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& b,
                          const Tensor& y, Device device);
void check_conv2d_backward_data(const Conv2dParams& p, const Tensor& dy, const Tensor& w,
                                const Tensor& dx, Device device);
void check_conv2d_backward_weights(const Conv2dParams& p, const Tensor& x, const Tensor& dy,
                                   const Tensor& dw, const Tensor& db, Device device);

}  // namespace convoy
