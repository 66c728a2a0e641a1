#pragma once
// Dt: the element types the kernels see. The .cu files are built as C++17 and see no
// Tensor, so this mirrors convoy::DType value for value (the backend static_asserts it).
// Host-only: the backend's C++ files include it through the launcher headers.

namespace convoy::kernels {

enum class Dt : int { f32 = 0, bf16 = 1, f16 = 2, i32 = 3, u8 = 4 };  // == convoy::DType

}  // namespace convoy::kernels
