#pragma once
// pool2d: max and average pooling over (H, W) windows (PyTorch's MaxPool2d / AvgPool2d).
#include <cstdint>

#include "engine/core/tensor.h"

namespace convoy {

enum class PoolKind : uint8_t { max, avg };

struct Pool2dParams {
  PoolKind kind = PoolKind::max;
  int64_t kernel_h = 2, kernel_w = 2;
  int64_t stride_h = 2, stride_w = 2;
  int64_t pad_h = 0, pad_w = 0;
  // Average pooling divides by the window size clipped to the unpadded input (PyTorch's
  // count_include_pad=False); max pooling ignores padding.
};

// x (N, C, H, W) -> y (N, C, P, Q); P or Q <= 0 when the window does not fit.
Shape pool2d_output_shape(const Pool2dParams& p, const Shape& x);

// Argument checks for a backend on `device` (InternalError on failure).
void check_pool2d_forward(const Pool2dParams& p, const Tensor& x, const Tensor& y, Device device);
void check_pool2d_backward(const Pool2dParams& p, const Tensor& x, const Tensor& y, const Tensor& dy,
                           const Tensor& dx, Device device);

}  // namespace convoy
