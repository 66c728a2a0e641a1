#pragma once
// channel_scale: each (sample, channel) plane of x multiplied by one number, squeeze-and-
// excitation's x * s with s broadcast over H and W (PyTorch's `x * s` of a (N, C, 1, 1) s).
#include "engine/core/tensor.h"

namespace convoy {

// x (N, C, H, W) in any layout, s (N, C) or (N, C, 1, 1) of x's dtype, y like x.
// InternalError on failure; every tensor must live on `device`.
void check_channel_scale_forward(const Tensor& x, const Tensor& s, const Tensor& y, Device device);
// dy and dx like x, ds like s; dx or ds may be undefined (not wanted), not both.
void check_channel_scale_backward(const Tensor& x, const Tensor& s, const Tensor& dy, const Tensor& dx,
                                  const Tensor& ds, Device device);

}  // namespace convoy
