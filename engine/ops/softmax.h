#pragma once
// softmax and the softmax cross-entropy loss with label smoothing.
#include "engine/core/tensor.h"

namespace convoy {

// logits (N, C) floating, labels (N) i32, loss (1) f32, dlogits like logits or undefined,
// correct (1) i32 or undefined. InternalError on failure.
void check_softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float smoothing,
                                 const Tensor& loss, const Tensor& dlogits, const Tensor& correct,
                                 Device device);
// logits (N, C) -> probs (N, C) f32.
void check_softmax(const Tensor& logits, const Tensor& probs, Device device);

}  // namespace convoy
