#pragma once
// softmax and the softmax cross-entropy loss with label smoothing, and the softmax layer's
// softmax over channels (dim 1 of (N, C) or (N, C, H, W), as torch.nn.Softmax(dim=1)).
#include "engine/core/tensor.h"

namespace convoy {

// logits (N, C) floating, labels (N) i32, loss (1) f32, dlogits like logits or undefined,
// correct (1) i32 or undefined. InternalError on failure.
void check_softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float smoothing,
                                 const Tensor& loss, const Tensor& dlogits, const Tensor& correct,
                                 Device device);
// logits (N, C) -> probs (N, C) f32.
void check_softmax(const Tensor& logits, const Tensor& probs, Device device);
// x (N, C) or (N, C, H, W) -> y like x: y = exp(x - max_c x) / sum_c exp(x - max_c x) over C.
void check_channel_softmax_forward(const Tensor& x, const Tensor& y, Device device);
// y (the forward's output), dy -> dx = y * (dy - sum_c y dy), all alike.
void check_channel_softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, Device device);

}  // namespace convoy
