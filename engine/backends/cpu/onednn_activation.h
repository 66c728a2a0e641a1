#pragma once
// Each Activation as oneDNN eltwise algorithms, for the CPU ops (cpu_activation.cpp) and the
// inference plans' post-ops and steps (engine/inference): one table, so the two agree.
#include <oneapi/dnnl/dnnl.hpp>

#include <string>

#include "engine/core/error.h"
#include "engine/ops/activation.h"

namespace convoy::cpu {

// y = scale * alg(x; alpha, beta) + shift. The affine tail is eltwise_linear, a second
// primitive or post-op, where it is not the identity: oneDNN 2.x (Debian 12's) has no
// hardsigmoid, which is clip_v2(x, -3, 3) / 6 + 1/2. Its derivative is scale * alg'(x).
struct OnednnActivation {
  dnnl::algorithm alg = dnnl::algorithm::eltwise_relu;
  float alpha = 0.0f, beta = 0.0f;
  float scale = 1.0f, shift = 0.0f;
  bool affine() const { return scale != 1.0f || shift != 0.0f; }
};

// alpha: the op's alpha (leaky relu's negative slope; the other kinds ignore it).
inline OnednnActivation onednn_activation(Activation kind, float alpha) {
  using dnnl::algorithm;
  const auto sixth = static_cast<float>(kHardSigmoidAlpha);
  const auto half = static_cast<float>(kHardSigmoidBeta);
  switch (kind) {
    case Activation::relu: return {algorithm::eltwise_relu};
    case Activation::leaky_relu: return {algorithm::eltwise_relu, alpha};  // alpha = negative slope
    case Activation::gelu: return {algorithm::eltwise_gelu_erf};
    case Activation::sigmoid: return {algorithm::eltwise_logistic};
    case Activation::silu: return {algorithm::eltwise_swish, 1.0f};  // x * sigmoid(alpha * x)
    // x * clamp(alpha * x + beta, 0, 1): oneDNN 3.x reads alpha and beta, 2.x fixes them at these.
    case Activation::hardswish: return {algorithm::eltwise_hardswish, sixth, half};
    case Activation::relu6: return {algorithm::eltwise_clip_v2, 0.0f, static_cast<float>(kRelu6Max)};
    case Activation::hardsigmoid: {
      const auto edge = static_cast<float>(kHardSigmoidBeta / kHardSigmoidAlpha);  // 3
      return {algorithm::eltwise_clip_v2, -edge, edge, sixth, half};
    }
  }
  throw InternalError("onednn_activation: unknown activation " + std::to_string(static_cast<int>(kind)));
}

}  // namespace convoy::cpu
