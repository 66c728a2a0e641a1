// Elementwise and data-movement kernels: adds, casts, fill, dropout, channel copies (concat
// and split). Layout-agnostic: they see flat arrays (channel copies take the
// (outer, C, inner) view that both nchw and nhwc reduce to).
#include <string>

#include "engine/core/counter_rng.h"
#include "kernels/common.cuh"
#include "kernels/vec.cuh"
#include "kernels/elementwise.cuh"

namespace convoy::kernels {

// ---- kernels ------------------------------------------------------------------------------

// a + b, then the ReLU where one is fused after the add (as activation.cu's: v > 0 ? v : 0).
__device__ __forceinline__ float add_value(float a, float b, bool relu) {
  const float v = a + b;
  return relu && !(v > 0.f) ? 0.f : v;
}

template <class T>
__global__ void add_kernel(const T* a, const T* b, T* y,
                           int64_t n, bool relu) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = from_f32<T>(add_value(to_f32(a[i]), to_f32(b[i]), relu));
}

// The same over 16-byte vectors (n a multiple of the width, pointers aligned); y may be a.
template <class T>
__global__ void add_vec_kernel(const T* a, const T* b, T* y, int64_t nvec, bool relu) {
  constexpr int V = kVec<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < nvec;
       i += int64_t(gridDim.x) * blockDim.x) {
    float fa[V], fb[V];
    load_vec(a + i * V, fa);
    load_vec(b + i * V, fb);
#pragma unroll
    for (int k = 0; k < V; ++k) fa[k] = add_value(fa[k], fb[k], relu);
    store_vec(y + i * V, fa);
  }
}

template <class T>
__global__ void add_inplace_kernel(T* y, const T* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = from_f32<T>(to_f32(y[i]) + to_f32(x[i]));
}

template <class A, class B>
__global__ void cast_kernel(const A* __restrict__ x, B* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = from_f32<B>(to_f32(x[i]));
}

// y = x with dtype and 4-D layout converted: x (n, c, hw) to y (n, hw, c) when to_nhwc, else
// back. Indexed by y, so the writes are coalesced.
template <class A, class B>
__global__ void cast_layout_kernel(const A* __restrict__ x, B* __restrict__ y, int64_t c, int64_t hw,
                                   bool to_nhwc, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t per_sample = c * hw, n = i / per_sample, r = i - n * per_sample;
    const int64_t src = to_nhwc ? n * per_sample + (r % c) * hw + r / c   // r = s * c + ch
                                : n * per_sample + (r % hw) * c + r / hw;  // r = ch * hw + s
    y[i] = from_f32<B>(to_f32(x[src]));
  }
}

template <class T>
__global__ void fill_kernel(T* __restrict__ y, T value, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = value;
}

template <class T>
__global__ void dropout_kernel(float p, float scale, uint64_t seed, const T* x,
                               T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const bool keep = counter_uniform(seed, static_cast<uint64_t>(i)) >= p;
    y[i] = from_f32<T>(keep ? to_f32(x[i]) * scale : 0.f);
  }
}

// to_y: y[(o, offset + c, i)] = x[(o, c, i)]; else the reverse.
template <class E>
__global__ void copy_channels_kernel(bool to_y, const E* __restrict__ src, E* __restrict__ dst,
                                     int64_t cx, int64_t cy, int64_t offset, int64_t inner,
                                     int64_t n) {
  const int64_t row = cx * inner;  // x elements per outer index
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = i / row, r = i - o * row;
    const int64_t j = o * cy * inner + offset * inner + r;
    if (to_y) dst[j] = src[i];
    else dst[i] = src[j];
  }
}

// ---- launchers ----------------------------------------------------------------------------

void add(Dt dt, const void* a, const void* b, void* y, int64_t n, cudaStream_t stream, bool relu) {
  if (n == 0) return;
  dispatch_float(dt, "add", [&](auto t) {
    using T = decltype(t);
    if (vectorizable<T>(n, {a, b, y})) {
      const int64_t nvec = n / kVec<T>;
      add_vec_kernel<T><<<grid_for(nvec), kThreads, 0, stream>>>(
          static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y), nvec, relu);
      CONVOY_LAUNCH_CHECK(add_vec_kernel);
      return;
    }
    add_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(a),
                                                         static_cast<const T*>(b),
                                                         static_cast<T*>(y), n, relu);
    CONVOY_LAUNCH_CHECK(add_kernel);
  });
}

void add_inplace(Dt dt, void* y, const void* x, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  dispatch_float(dt, "add_inplace", [&](auto t) {
    using T = decltype(t);
    if (vectorizable<T>(n, {y, x})) {  // y += x is y = y + x
      const int64_t nvec = n / kVec<T>;
      add_vec_kernel<T><<<grid_for(nvec), kThreads, 0, stream>>>(
          static_cast<const T*>(y), static_cast<const T*>(x), static_cast<T*>(y), nvec, false);
      CONVOY_LAUNCH_CHECK(add_vec_kernel);
      return;
    }
    add_inplace_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<T*>(y),
                                                                 static_cast<const T*>(x), n);
    CONVOY_LAUNCH_CHECK(add_inplace_kernel);
  });
}

namespace {
// Bytes per element, for the plain copy of a cast that keeps the dtype.
size_t dt_size(Dt dt) {
  switch (dt) {
    case Dt::f32:
    case Dt::i32: return 4;
    case Dt::bf16:
    case Dt::f16: return 2;
    case Dt::u8: return 1;
  }
  unsupported_dtype("cast", dt);
}
}  // namespace

void cast(Dt from, const void* x, Dt to, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  if (from == to) {
    CONVOY_CUDA_CHECK(cudaMemcpyAsync(y, x, n * dt_size(from), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  dispatch_float(from, "cast (source)", [&](auto a) {
    using A = decltype(a);
    dispatch_float(to, "cast (destination)", [&](auto b) {
      using B = decltype(b);
      cast_kernel<A, B><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const A*>(x),
                                                               static_cast<B*>(y), n);
      CONVOY_LAUNCH_CHECK(cast_kernel);
    });
  });
}

namespace {
template <class T>
void launch_fill(T* y, T value, int64_t n, cudaStream_t stream) {
  fill_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(y, value, n);
  CONVOY_LAUNCH_CHECK(fill_kernel);
}
}  // namespace

void cast_layout(Dt from, const void* x, Dt to, void* y, int64_t n, int64_t c, int64_t hw, bool to_nhwc,
                 cudaStream_t stream) {
  const int64_t total = n * c * hw;
  if (total == 0) return;
  dispatch_float(from, "cast_layout (source)", [&](auto a) {
    using A = decltype(a);
    dispatch_float(to, "cast_layout (destination)", [&](auto b) {
      using B = decltype(b);
      cast_layout_kernel<A, B><<<grid_for(total), kThreads, 0, stream>>>(
          static_cast<const A*>(x), static_cast<B*>(y), c, hw, to_nhwc, total);
      CONVOY_LAUNCH_CHECK(cast_layout_kernel);
    });
  });
}

void fill(Dt dt, void* y, float value, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  switch (dt) {
    case Dt::f32: launch_fill(static_cast<float*>(y), value, n, stream); return;
    case Dt::bf16: launch_fill(static_cast<__nv_bfloat16*>(y), __float2bfloat16_rn(value), n, stream); return;
    case Dt::f16: launch_fill(static_cast<__half*>(y), __float2half_rn(value), n, stream); return;
    case Dt::i32: launch_fill(static_cast<int32_t*>(y), static_cast<int32_t>(value), n, stream); return;
    case Dt::u8: launch_fill(static_cast<uint8_t*>(y), static_cast<uint8_t>(value), n, stream); return;
  }
  unsupported_dtype("fill", dt);
}

void dropout(Dt dt, float p, uint64_t seed, const void* x, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  const float scale = p < 1.f ? 1.f / (1.f - p) : 0.f;
  dispatch_float(dt, "dropout", [&](auto t) {
    using T = decltype(t);
    dropout_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(p, scale, seed, static_cast<const T*>(x),
                                                             static_cast<T*>(y), n);
    CONVOY_LAUNCH_CHECK(dropout_kernel);
  });
}

void copy_channels(int elem_size, bool to_y, const void* x, void* y, int64_t outer, int64_t cx,
                   int64_t cy, int64_t offset, int64_t inner, cudaStream_t stream) {
  const int64_t n = outer * cx * inner;
  if (n == 0) return;
  auto go = [&](auto e) {
    using E = decltype(e);
    const E* src = static_cast<const E*>(to_y ? x : y);
    E* dst = static_cast<E*>(to_y ? y : const_cast<void*>(x));
    copy_channels_kernel<E><<<grid_for(n), kThreads, 0, stream>>>(to_y, src, dst, cx, cy, offset,
                                                                   inner, n);
    CONVOY_LAUNCH_CHECK(copy_channels_kernel);
  };
  switch (elem_size) {
    case 1: go(uint8_t{}); return;
    case 2: go(uint16_t{}); return;
    case 4: go(uint32_t{}); return;
    case 8: go(uint64_t{}); return;
  }
  throw InternalError("copy_channels: unsupported element size " + std::to_string(elem_size));
}

}  // namespace convoy::kernels
