#pragma once
// Division of non-negative indices by a runtime divisor, for kernels that decode flat indices
// (device code: only .cu files include this). 64-bit integer division is emulated on the GPU
// and costs tens of instructions, 32-bit division about twenty; the int32_t form is a
// multiply-high and a shift with constants computed once on the host.
#include <cuda_runtime.h>

#include <cstdint>

namespace convoy::kernels {

// n / d for 0 <= n: plain division for int64_t indices; for int32_t, valid for n < 2^31,
// a multiply-high and a shift (Granlund & Montgomery 1994, as PyTorch's IntDivider).
// make(0) divides by 1: a zero size means an empty tensor, over which nothing is launched,
// and the divider stays defined.
template <class I> struct Div;
template <> struct Div<int64_t> {
  int64_t d;
  static Div make(int64_t d) { return {d > 0 ? d : 1}; }
  __device__ __forceinline__ int64_t operator()(int64_t n) const { return n / d; }
};
template <> struct Div<int32_t> {
  uint32_t magic, shift;
  static Div make(int64_t d) {  // d < 2^31
    if (d < 1) d = 1;
    uint32_t s = 0;
    while ((uint64_t(1) << s) < uint64_t(d)) ++s;
    return {uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << s) - d)) / d + 1), s};
  }
  __device__ __forceinline__ int32_t operator()(int32_t n) const {
    const uint32_t u = uint32_t(n);
    return int32_t((__umulhi(u, magic) + u) >> shift);  // no overflow: umulhi <= u < 2^31
  }
};

}  // namespace convoy::kernels
