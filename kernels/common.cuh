#pragma once
// Device helpers shared by the kernels: element loads and stores through f32, launch
// sizing, dtype dispatch, and warp/block reductions. Device code: only .cu files include
// this; each family's launchers are declared in its own host-only header.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/cuda_runtime_check.h"
#include "kernels/dt.cuh"

namespace convoy::kernels {

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }

template <class T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <> __device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements: enough to fill the chip several times.
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  if (blocks > 65536) blocks = 65536;
  return static_cast<unsigned>(blocks);
}

[[noreturn]] inline void unsupported_dtype(const char* what, Dt dt) {
  static const char* names[] = {"F32", "BF16", "F16", "I32", "U8"};
  const int i = static_cast<int>(dt);
  throw ::convoy::InternalError(std::string(what) + ": unsupported dtype " +
                                (i >= 0 && i < 5 ? names[i] : "?"));
}

// Calls f(T{}) with T the element type of a floating dtype.
template <class F>
void dispatch_float(Dt dt, const char* what, F&& f) {
  switch (dt) {
    case Dt::f32: f(float{}); return;
    case Dt::bf16: f(__nv_bfloat16{}); return;
    case Dt::f16: f(__half{}); return;
    case Dt::i32:
    case Dt::u8: break;
  }
  unsupported_dtype(what, dt);
}

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
template <class T>
__device__ T block_sum(T v) {
  __shared__ T partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // partial may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  T t = lane < warps ? partial[lane] : T(0);
  return warp_sum(t);
}

}  // namespace convoy::kernels
