// The 8-bit inference plan's own kernels (eight_bit.cuh): conversions to and from bf16, max
// pooling on the 8-bit values, and the global average pool that hands the bf16 classifier its
// input. Memory-bound element loops; the convolutions themselves are cuDNN's.
#include <cuda_fp8.h>

#include <climits>
#include <type_traits>

#include "kernels/common.cuh"
#include "kernels/eight_bit.cuh"

namespace convoy::kernels {
namespace {

template <Byte8 T> __device__ __forceinline__ float byte_value(uint8_t b);
template <> __device__ __forceinline__ float byte_value<Byte8::int8>(uint8_t b) {
  return static_cast<float>(static_cast<int8_t>(b));
}
template <> __device__ __forceinline__ float byte_value<Byte8::e4m3>(uint8_t b) {
  __nv_fp8_e4m3 v;
  v.__x = b;
  return static_cast<float>(v);
}
// Round to nearest (even), saturated: int8 to [-127, 127] (symmetric, as the weights), e4m3 to
// its largest finite value, 448.
template <Byte8 T> __device__ __forceinline__ uint8_t to_byte(float v);
template <> __device__ __forceinline__ uint8_t to_byte<Byte8::int8>(float v) {
  return static_cast<uint8_t>(static_cast<int8_t>(fminf(fmaxf(rintf(v), -127.f), 127.f)));
}
template <> __device__ __forceinline__ uint8_t to_byte<Byte8::e4m3>(float v) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

template <Byte8 T>
__global__ void quantize_kernel(const __nv_bfloat16* __restrict__ x, uint8_t* __restrict__ y, int64_t n, float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = to_byte<T>(__bfloat162float(x[i]) * scale);
}

// I: the index type, 32-bit where n fits (a 64-bit modulo is tens of emulated instructions).
template <Byte8 T, class I>
__global__ void bias_relu_quantize_kernel(const __nv_bfloat16* __restrict__ x, const float* __restrict__ bias,
                                          uint8_t* __restrict__ y, I n, I c, bool relu, float scale) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < n; i += I(gridDim.x) * blockDim.x) {
    float v = __bfloat162float(x[i]) + bias[i % c];
    if (relu) v = fmaxf(v, 0.f);
    y[i] = to_byte<T>(v * scale);
  }
}

template <Byte8 T>
__global__ void dequantize_kernel(const uint8_t* __restrict__ x, __nv_bfloat16* __restrict__ y, int64_t n,
                                  float inv_scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = __float2bfloat16_rn(byte_value<T>(x[i]) * inv_scale);
}

struct PoolArgs {
  int64_t n, h, w, c, p, q;
  int kh, kw, sh, sw, ph, pw;
};

// One thread per output byte; neighbouring threads take neighbouring channels (coalesced).
template <Byte8 T>
__global__ void max_pool_kernel(const uint8_t* __restrict__ x, uint8_t* __restrict__ y, PoolArgs a, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t rest = i;
    const int64_t ch = rest % a.c;
    rest /= a.c;
    const int64_t oq = rest % a.q;
    rest /= a.q;
    const int64_t op = rest % a.p;
    const int64_t img = rest / a.p;
    const int64_t y0 = op * a.sh - a.ph, x0 = oq * a.sw - a.pw;
    float best = -INFINITY;
    uint8_t best_byte = 0;
    for (int r = 0; r < a.kh; ++r) {
      const int64_t iy = y0 + r;
      if (iy < 0 || iy >= a.h) continue;
      for (int s = 0; s < a.kw; ++s) {
        const int64_t ix = x0 + s;
        if (ix < 0 || ix >= a.w) continue;
        const uint8_t b = x[((img * a.h + iy) * a.w + ix) * a.c + ch];
        const float v = byte_value<T>(b);
        if (v > best) best = v, best_byte = b;
      }
    }
    y[i] = best_byte;
  }
}

// One thread per (image, channel): the plane's values summed in f32 (exact for int8 below 2^24
// / 127 = 132,104 values a plane), then scaled once.
template <Byte8 T>
__global__ void global_avg_pool_kernel(const uint8_t* __restrict__ x, __nv_bfloat16* __restrict__ y, int64_t n,
                                       int64_t hw, int64_t c, float inv_scale_over_hw) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * c; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t img = i / c, ch = i % c;
    const uint8_t* plane = x + img * hw * c + ch;
    float sum = 0.f;
    for (int64_t j = 0; j < hw; ++j) sum += byte_value<T>(plane[j * c]);
    y[i] = __float2bfloat16_rn(sum * inv_scale_over_hw);
  }
}

// f(constant) with the type as a compile-time constant (decltype(constant)::value).
template <class F>
void dispatch_byte8(Byte8 type, F&& f) {
  if (type == Byte8::int8) f(std::integral_constant<Byte8, Byte8::int8>{});
  else f(std::integral_constant<Byte8, Byte8::e4m3>{});
}

}  // namespace

void quantize_bf16(const void* x, void* y, int64_t n, float scale, Byte8 type, cudaStream_t stream) {
  if (n == 0) return;
  dispatch_byte8(type, [&](auto type_constant) {
    constexpr Byte8 T = decltype(type_constant)::value;
    quantize_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(x),
                                                             static_cast<uint8_t*>(y), n, scale);
    CONVOY_LAUNCH_CHECK(quantize_kernel);
  });
}

void bias_relu_quantize_bf16(const void* x, const float* bias, void* y, int64_t n, int64_t c, bool relu,
                             float scale, Byte8 type, cudaStream_t stream) {
  if (n == 0) return;
  dispatch_byte8(type, [&](auto type_constant) {
    constexpr Byte8 T = decltype(type_constant)::value;
    const auto* in = static_cast<const __nv_bfloat16*>(x);
    auto* out = static_cast<uint8_t*>(y);
    if (n < INT32_MAX / 2)
      bias_relu_quantize_kernel<T, int32_t><<<grid_for(n), kThreads, 0, stream>>>(
          in, bias, out, static_cast<int32_t>(n), static_cast<int32_t>(c), relu, scale);
    else
      bias_relu_quantize_kernel<T, int64_t><<<grid_for(n), kThreads, 0, stream>>>(in, bias, out, n, c, relu, scale);
    CONVOY_LAUNCH_CHECK(bias_relu_quantize_kernel);
  });
}

void dequantize_to_bf16(const void* x, void* y, int64_t n, float inv_scale, Byte8 type, cudaStream_t stream) {
  if (n == 0) return;
  dispatch_byte8(type, [&](auto type_constant) {
    constexpr Byte8 T = decltype(type_constant)::value;
    dequantize_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const uint8_t*>(x),
                                                               static_cast<__nv_bfloat16*>(y), n, inv_scale);
    CONVOY_LAUNCH_CHECK(dequantize_kernel);
  });
}

void max_pool_8bit(const void* x, void* y, int64_t n, int64_t h, int64_t w, int64_t c, int64_t p, int64_t q,
                   int kernel_h, int kernel_w, int stride_h, int stride_w, int pad_h, int pad_w, Byte8 type,
                   cudaStream_t stream) {
  const int64_t total = n * p * q * c;
  if (total == 0) return;
  const PoolArgs a{n, h, w, c, p, q, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w};
  dispatch_byte8(type, [&](auto type_constant) {
    constexpr Byte8 T = decltype(type_constant)::value;
    max_pool_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(static_cast<const uint8_t*>(x),
                                                                 static_cast<uint8_t*>(y), a, total);
    CONVOY_LAUNCH_CHECK(max_pool_kernel);
  });
}

void global_avg_pool_8bit(const void* x, void* y, int64_t n, int64_t hw, int64_t c, float inv_scale, Byte8 type,
                          cudaStream_t stream) {
  if (n * c == 0) return;
  dispatch_byte8(type, [&](auto type_constant) {
    constexpr Byte8 T = decltype(type_constant)::value;
    global_avg_pool_kernel<T><<<grid_for(n * c), kThreads, 0, stream>>>(
        static_cast<const uint8_t*>(x), static_cast<__nv_bfloat16*>(y), n, hw, c,
        inv_scale / static_cast<float>(hw));
    CONVOY_LAUNCH_CHECK(global_avg_pool_kernel);
  });
}

}  // namespace convoy::kernels
