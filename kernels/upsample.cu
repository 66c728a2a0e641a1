// Nearest and bilinear resizing (PyTorch's align_corners=False rules, engine/ops/upsample.h),
// forward and backward, in nchw and nhwc. Backward is a gather: each input element sums the
// outputs that read it, so no atomics and the same bits every run.
#include "kernels/common.cuh"
#include "kernels/upsample.cuh"

namespace convoy::kernels {

// ---- kernels ------------------------------------------------------------------------------

// Where output coordinate `o` of `out` reads input `in`: indices i0, i1 with weights l0, l1.
struct Taps {
  int64_t i0, i1;
  float l0, l1;
};

__device__ __forceinline__ Taps taps(bool bilinear, int64_t o, int64_t in, int64_t out) {
  if (!bilinear) {
    const int64_t i = o * in / out;  // exact: out is a whole multiple of in
    return {i, i, 1.f, 0.f};
  }
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  const float src = fmaxf((static_cast<float>(o) + 0.5f) * scale - 0.5f, 0.f);
  const int64_t i0 = min(static_cast<int64_t>(src), in - 1);
  const int64_t i1 = min(i0 + 1, in - 1);
  const float l1 = src - static_cast<float>(i0);
  return {i0, i1, 1.f - l1, l1};
}

// Input i's weight in output o's value.
__device__ __forceinline__ float tap_weight(const Taps& t, int64_t i) {
  return (t.i0 == i ? t.l0 : 0.f) + (t.i1 == i ? t.l1 : 0.f);
}

__device__ __forceinline__ int64_t offset(const UpsampleGeom& g, int64_t n, int64_t c, int64_t y, int64_t x,
                                          int64_t hh, int64_t ww) {
  return g.nhwc ? ((n * hh + y) * ww + x) * g.c + c : ((n * g.c + c) * hh + y) * ww + x;
}

// Decodes flat index i of a (n, c, hh, ww) tensor in g's layout.
__device__ __forceinline__ void decode(const UpsampleGeom& g, int64_t i, int64_t hh, int64_t ww, int64_t& n,
                                       int64_t& c, int64_t& y, int64_t& x) {
  if (g.nhwc) {
    c = i % g.c;
    i /= g.c;
    x = i % ww;
    i /= ww;
    y = i % hh;
    n = i / hh;
  } else {
    x = i % ww;
    i /= ww;
    y = i % hh;
    i /= hh;
    c = i % g.c;
    n = i / g.c;
  }
}

template <class T>
__global__ void upsample_forward_kernel(UpsampleGeom g, const T* x, T* y, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t n, c, oy, ox;
    decode(g, i, g.p, g.q, n, c, oy, ox);
    const Taps ty = taps(g.bilinear, oy, g.h, g.p), tx = taps(g.bilinear, ox, g.w, g.q);
    auto at = [&](int64_t iy, int64_t ix) { return to_f32(x[offset(g, n, c, iy, ix, g.h, g.w)]); };
    float v = ty.l0 * (tx.l0 * at(ty.i0, tx.i0) + tx.l1 * at(ty.i0, tx.i1));
    if (ty.l1 != 0.f) v += ty.l1 * (tx.l0 * at(ty.i1, tx.i0) + tx.l1 * at(ty.i1, tx.i1));
    y[i] = from_f32<T>(v);
  }
}

// The outputs along one axis that may read input i: a superset of both modes' readers.
__device__ __forceinline__ void readers(int64_t i, int64_t in, int64_t out, int64_t& lo, int64_t& hi) {
  lo = max(int64_t(0), (max(i - 1, int64_t(0)) * out) / in - 2);
  hi = min(out - 1, ((i + 2) * out + in - 1) / in + 1);
}

template <class T>
__global__ void upsample_backward_kernel(UpsampleGeom g, const T* dy, T* dx, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t n, c, iy, ix;
    decode(g, i, g.h, g.w, n, c, iy, ix);
    int64_t y_lo, y_hi, x_lo, x_hi;
    readers(iy, g.h, g.p, y_lo, y_hi);
    readers(ix, g.w, g.q, x_lo, x_hi);
    float sum = 0.f;
    for (int64_t oy = y_lo; oy <= y_hi; ++oy) {
      const float wy = tap_weight(taps(g.bilinear, oy, g.h, g.p), iy);
      if (wy == 0.f) continue;
      float row = 0.f;
      for (int64_t ox = x_lo; ox <= x_hi; ++ox) {
        const float wx = tap_weight(taps(g.bilinear, ox, g.w, g.q), ix);
        if (wx != 0.f) row += wx * to_f32(dy[offset(g, n, c, oy, ox, g.p, g.q)]);
      }
      sum += wy * row;
    }
    dx[i] = from_f32<T>(sum);
  }
}

// ---- launchers ----------------------------------------------------------------------------

void upsample_forward(const UpsampleGeom& g, Dt dt, const void* x, void* y, cudaStream_t stream) {
  const int64_t total = g.n * g.c * g.p * g.q;
  if (total == 0) return;
  dispatch_float(dt, "upsample_forward", [&](auto t) {
    using T = decltype(t);
    upsample_forward_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(g, static_cast<const T*>(x),
                                                                         static_cast<T*>(y), total);
    CONVOY_LAUNCH_CHECK(upsample_forward_kernel);
  });
}

void upsample_backward(const UpsampleGeom& g, Dt dt, const void* dy, void* dx, cudaStream_t stream) {
  const int64_t total = g.n * g.c * g.h * g.w;
  if (total == 0) return;
  dispatch_float(dt, "upsample_backward", [&](auto t) {
    using T = decltype(t);
    upsample_backward_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(g, static_cast<const T*>(dy),
                                                                          static_cast<T*>(dx), total);
    CONVOY_LAUNCH_CHECK(upsample_backward_kernel);
  });
}

}  // namespace convoy::kernels
