// 2-D max and average pooling, forward and backward, nchw or nhwc, PyTorch semantics:
// max ignores padding and routes the gradient to the first maximum of each window in
// row-major order; average divides by the window clipped to the unpadded input
// (count_include_pad=False). Backward gathers per input element: no atomics, and the
// result is deterministic.
#include <cfloat>

#include "kernels/common.cuh"

namespace convoy::kernels {

// ---- kernels ------------------------------------------------------------------------------

__device__ __forceinline__ int64_t pool_index(const PoolShape& s, int64_t n, int64_t c, int64_t h,
                                              int64_t w, int64_t height, int64_t width) {
  return s.nhwc ? ((n * height + h) * width + w) * s.c + c : ((n * s.c + c) * height + h) * width + w;
}

// Decodes a flat memory index of a (n, c, height, width) tensor in the shape's layout.
__device__ __forceinline__ void pool_decode(const PoolShape& s, int64_t i, int64_t height,
                                            int64_t width, int64_t& n, int64_t& c, int64_t& h,
                                            int64_t& w) {
  if (s.nhwc) {
    c = i % s.c; i /= s.c;
    w = i % width; i /= width;
    h = i % height; n = i / height;
  } else {
    w = i % width; i /= width;
    h = i % height; i /= height;
    c = i % s.c; n = i / s.c;
  }
}

// First maximum of window (p, q) as a flat (h * W + w) position, or -1 if it is empty.
template <class T>
__device__ __forceinline__ int64_t window_argmax(const PoolShape& s, const T* x, int64_t n,
                                                 int64_t c, int64_t p, int64_t q, float* best_out) {
  const int64_t h0 = p * s.stride_h - s.pad_h, w0 = q * s.stride_w - s.pad_w;
  const int64_t h1 = min(h0 + s.kernel_h, s.h), w1 = min(w0 + s.kernel_w, s.w);
  float best = -INFINITY;
  int64_t arg = -1;
  for (int64_t h = max(h0, int64_t(0)); h < h1; ++h)
    for (int64_t w = max(w0, int64_t(0)); w < w1; ++w) {
      const float v = to_f32(x[pool_index(s, n, c, h, w, s.h, s.w)]);
      if (arg < 0 || v > best || (isnan(v) && !isnan(best))) {  // a NaN wins, the first one
        best = v;
        arg = h * s.w + w;
      }
    }
  *best_out = best;
  return arg;
}

template <class T>
__global__ void pool_forward_kernel(PoolShape s, const T* __restrict__ x, T* __restrict__ y,
                                    int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t n, c, p, q;
    pool_decode(s, i, s.p, s.q, n, c, p, q);
    float r;
    if (s.max) {
      float best;
      r = window_argmax(s, x, n, c, p, q, &best) >= 0 ? best : 0.f;
    } else {
      const int64_t h0 = p * s.stride_h - s.pad_h, w0 = q * s.stride_w - s.pad_w;
      const int64_t h1 = min(h0 + s.kernel_h, s.h), w1 = min(w0 + s.kernel_w, s.w);
      float sum = 0.f;
      int64_t count = 0;
      for (int64_t h = max(h0, int64_t(0)); h < h1; ++h)
        for (int64_t w = max(w0, int64_t(0)); w < w1; ++w, ++count)
          sum += to_f32(x[pool_index(s, n, c, h, w, s.h, s.w)]);
      r = count > 0 ? sum / static_cast<float>(count) : 0.f;
    }
    y[i] = from_f32<T>(r);
  }
}

template <class T>
__global__ void pool_backward_kernel(PoolShape s, const T* __restrict__ x, const T* __restrict__ dy,
                                     T* __restrict__ dx, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t n, c, h, w;
    pool_decode(s, i, s.h, s.w, n, c, h, w);
    // Output windows that cover (h, w): p * stride - pad <= h < p * stride - pad + kernel.
    const int64_t hp = h + s.pad_h, wp = w + s.pad_w;
    const int64_t p0 = hp < s.kernel_h ? 0 : (hp - s.kernel_h) / s.stride_h + 1;
    const int64_t p1 = min(hp / s.stride_h + 1, s.p);
    const int64_t q0 = wp < s.kernel_w ? 0 : (wp - s.kernel_w) / s.stride_w + 1;
    const int64_t q1 = min(wp / s.stride_w + 1, s.q);
    float g = 0.f;
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t q = q0; q < q1; ++q) {
        const float d = to_f32(dy[pool_index(s, n, c, p, q, s.p, s.q)]);
        if (s.max) {
          float best;
          if (window_argmax(s, x, n, c, p, q, &best) == h * s.w + w) g += d;
        } else {
          const int64_t h0 = p * s.stride_h - s.pad_h, w0 = q * s.stride_w - s.pad_w;
          const int64_t hc = min(h0 + s.kernel_h, s.h) - max(h0, int64_t(0));
          const int64_t wc = min(w0 + s.kernel_w, s.w) - max(w0, int64_t(0));
          g += d / static_cast<float>(hc * wc);
        }
      }
    dx[i] = from_f32<T>(g);
  }
}

// ---- launchers ----------------------------------------------------------------------------

void pool2d_forward(const PoolShape& s, Dt dt, const void* x, void* y, cudaStream_t stream) {
  const int64_t total = s.n * s.c * s.p * s.q;
  if (total == 0) return;
  dispatch_float(dt, "pool2d_forward", [&](auto t) {
    using T = decltype(t);
    pool_forward_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(
        s, static_cast<const T*>(x), static_cast<T*>(y), total);
    CONVOY_LAUNCH_CHECK(pool_forward_kernel);
  });
}

void pool2d_backward(const PoolShape& s, Dt dt, const void* x, const void* dy, void* dx,
                     cudaStream_t stream) {
  const int64_t total = s.n * s.c * s.h * s.w;
  if (total == 0) return;
  dispatch_float(dt, "pool2d_backward", [&](auto t) {
    using T = decltype(t);
    pool_backward_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(
        s, static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), total);
    CONVOY_LAUNCH_CHECK(pool_backward_kernel);
  });
}

}  // namespace convoy::kernels
