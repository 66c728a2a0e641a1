#pragma once
// activation: elementwise relu, leaky relu and gelu, any shape. This header is plain C++17
// with no Tensor, so the CUDA kernels (kernels/) use the same enum.
#include <cstdint>

namespace convoy {

enum class Activation : uint8_t { relu, leaky_relu, gelu };  // gelu is the exact erf form

// relu and leaky relu with a positive slope keep their input's sign, so their backward can
// read the output y in place of the input x.
inline bool activation_backward_reads_output(Activation kind, float alpha) {
  switch (kind) {
    case Activation::relu: return true;
    case Activation::leaky_relu: return alpha > 0.f;
    case Activation::gelu: return false;
  }
  return false;
}

}  // namespace convoy
