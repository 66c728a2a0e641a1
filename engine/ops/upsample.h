#pragma once
// upsample: nearest and bilinear resizing of (N, C, H, W) to (N, C, P, Q), PyTorch's
// F.interpolate with align_corners=False. The output's size is y's; this header is plain C++17
// with no Tensor beyond the checks, so the CUDA kernels read the same coordinate rules.
#include <cstdint>

#include "engine/core/tensor.h"

namespace convoy {

enum class UpsampleMode : uint8_t { nearest, bilinear };

// The coordinate rules (PyTorch's, align_corners=False), with r = in / out:
//   nearest:  src = floor(dst * r); only whole multiples out = k * in are allowed (upsample_refusal),
//             where it is dst / k exactly and oneDNN's rule (floor((dst + 0.5) r)) agrees.
//   bilinear: src = max((dst + 0.5) r - 0.5, 0), i0 = floor(src), i1 = min(i0 + 1, in - 1),
//             weights 1 - (src - i0) and src - i0 (oneDNN's linear resampling gives the same).
// Why `out` cannot be produced from `in` in `mode`, or "" when it can.
const char* upsample_refusal(UpsampleMode mode, int64_t in, int64_t out);

// x (N, C, H, W) -> y (N, C, P, Q), one dtype and layout.
void check_upsample_forward(UpsampleMode mode, const Tensor& x, const Tensor& y, Device device);
// dy (N, C, P, Q) -> dx (N, C, H, W), one dtype and layout.
void check_upsample_backward(UpsampleMode mode, const Tensor& dy, const Tensor& dx, Device device);

}  // namespace convoy
