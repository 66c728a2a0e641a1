#pragma once
// activation: elementwise relu, leaky relu, gelu, sigmoid, silu, hardsigmoid, hardswish and
// relu6, any shape. This header is plain C++17 with no Tensor, so the CUDA kernels (kernels/)
// use the same enum.
#include <cstdint>

namespace convoy {

// gelu is the exact erf form; silu (swish) is x * sigmoid(x); hardsigmoid and hardswish are
// PyTorch's (clamp(x / 6 + 1/2, 0, 1), and x times it); relu6 is clamp(x, 0, 6).
enum class Activation : uint8_t { relu, leaky_relu, gelu, sigmoid, silu, hardsigmoid, hardswish, relu6 };

// PyTorch's Hardsigmoid as ONNX's HardSigmoid writes it: max(0, min(1, alpha * x + beta)).
inline constexpr double kHardSigmoidAlpha = 1.0 / 6.0;
inline constexpr double kHardSigmoidBeta = 0.5;
inline constexpr double kRelu6Max = 6.0;

// relu and leaky relu with a positive slope keep their input's sign, so their backward can
// read the output y in place of the input x.
inline bool activation_backward_reads_output(Activation kind, float alpha) {
  switch (kind) {
    case Activation::relu: return true;
    case Activation::leaky_relu: return alpha > 0.f;
    case Activation::gelu:
    case Activation::sigmoid:
    case Activation::silu:
    case Activation::hardsigmoid:
    case Activation::hardswish:
    case Activation::relu6: return false;  // the kernels' backward reads x
  }
  return false;
}

}  // namespace convoy
