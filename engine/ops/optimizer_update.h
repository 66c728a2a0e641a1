#pragma once
// The fused optimizer updates: SGD and AdamW over all parameters at once.
#include <cstdint>
#include <span>

#include "engine/core/tensor.h"

namespace convoy {

struct SgdHyper {
  float lr = 0.1f;
  float momentum = 0.0f;
  bool nesterov = false;
  // Optional, (2) f32 on the update's device, added to (not reset): [0] the number of
  // non-finite gradient elements, [1] the sum of squares of the finite ones (the squared global
  // gradient norm). The update reads every gradient anyway, so the check costs no extra pass.
  Tensor* grad_stats = nullptr;
  // false: grad_stats only, no parameter or optimizer state touched (a look at the gradients
  // before deciding to update, as nan_policy: skip_step does).
  bool apply = true;
};
// One parameter for SGD (PyTorch semantics, dampening 0):
//   g = grad + weight_decay * param;  buf = momentum * buf + g;
//   g = nesterov ? g + momentum * buf : buf;  param -= lr * g
struct SgdSlot {
  Tensor* param;         // f32 master weights
  const Tensor* grad;    // f32, same shape
  Tensor* momentum_buf;  // f32, same shape, zero at the start
  float weight_decay;
};

struct AdamHyper {
  float lr = 1e-3f;
  float beta1 = 0.9f, beta2 = 0.999f;
  float eps = 1e-8f;
  int64_t step = 1;  // 1-based, after increment (for bias correction)
  // Optional, (2) f32 on the update's device, added to (not reset): [0] the number of
  // non-finite gradient elements, [1] the sum of squares of the finite ones (the squared global
  // gradient norm). The update reads every gradient anyway, so the check costs no extra pass.
  Tensor* grad_stats = nullptr;
  // false: grad_stats only, no parameter or optimizer state touched (a look at the gradients
  // before deciding to update, as nan_policy: skip_step does).
  bool apply = true;
};
// One parameter for AdamW (decoupled weight decay, PyTorch semantics):
//   param *= 1 - lr * weight_decay;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//   param -= lr * (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps)
struct AdamSlot {
  Tensor* param;
  const Tensor* grad;
  Tensor* m;
  Tensor* v;
  float weight_decay;
};

// InternalError on failure: every slot's tensors f32, of one size, on `device`.
void check_sgd_update(std::span<const SgdSlot> slots, const SgdHyper& h, Device device);
void check_adamw_update(std::span<const AdamSlot> slots, const AdamHyper& h, Device device);

}  // namespace convoy
