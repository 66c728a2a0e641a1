// 2-D max and average pooling, forward and backward, nchw or nhwc, PyTorch semantics:
// max ignores padding and routes the gradient to the first maximum of each window in
// row-major order; average divides by the window clipped to the unpadded input
// (count_include_pad=False). Backward gathers per input element: no atomics, and the
// result is deterministic.
//
// Speed: index math runs in 32-bit integers whenever every index fits (64-bit integer
// division is emulated on the GPU and costs tens of instructions), the divisions of a flat
// index by runtime sizes use precomputed multiply-and-shift constants, and backward finds
// the windows that cover an element in closed form (one division per axis when windows
// do not overlap), so for the usual 2x2/2 max pool each element evaluates one window.
#include <cfloat>
#include <climits>

#include "kernels/common.cuh"
#include "kernels/int_div.cuh"
#include "kernels/pool2d.cuh"
#include "kernels/vec.cuh"

namespace convoy::kernels {
namespace {

// PoolShape in the kernels' index type I, plus the dividers for decoding flat indices.
template <class I> struct Dims {
  I h, w, p, q, c, kh, kw, sh, sw, ph, pw;
  I step;            // distance between horizontally adjacent pixels: C in nhwc, 1 in nchw
  I x_plane, y_plane;  // distance between consecutive planes (n * C + c in nchw, n in nhwc)
  Div<I> div_c, div_hw, div_w, div_pq, div_q, div_sh, div_sw;
  bool nhwc, max;
};

template <class I>
Dims<I> make_dims(const PoolShape& s) {
  Dims<I> d;
  d.h = I(s.h), d.w = I(s.w), d.p = I(s.p), d.q = I(s.q), d.c = I(s.c);
  d.kh = s.kernel_h, d.kw = s.kernel_w, d.sh = s.stride_h, d.sw = s.stride_w;
  d.ph = s.pad_h, d.pw = s.pad_w;
  d.step = s.nhwc ? I(s.c) : 1;
  d.x_plane = I(s.h * s.w * (s.nhwc ? s.c : 1));
  d.y_plane = I(s.p * s.q * (s.nhwc ? s.c : 1));
  d.div_c = Div<I>::make(s.c), d.div_hw = Div<I>::make(s.h * s.w), d.div_w = Div<I>::make(s.w);
  d.div_pq = Div<I>::make(s.p * s.q), d.div_q = Div<I>::make(s.q);
  d.div_sh = Div<I>::make(s.stride_h), d.div_sw = Div<I>::make(s.stride_w);
  d.nhwc = s.nhwc, d.max = s.max;
  return d;
}

// True when every index and intermediate the kernels form fits in int32_t: the element
// counts, and window coordinates up to (p * stride + kernel) and (h + pad) per axis.
bool fits_int32(const PoolShape& s) {
  const int64_t lim = INT32_MAX;
  return s.n * s.c * s.h * s.w < lim && s.n * s.c * s.p * s.q < lim &&
         s.p * s.stride_h + s.kernel_h + s.h + s.pad_h < lim &&
         s.q * s.stride_w + s.kernel_w + s.w + s.pad_w < lim;
}

// Calls f(dims) with the narrowest index type that holds the shape.
template <class F>
void dispatch_index(const PoolShape& s, F&& f) {
  if (fits_int32(s)) f(make_dims<int32_t>(s));
  else f(make_dims<int64_t>(s));
}

// Flat index i of the tensor with `rows` x `cols` pixels per plane (x in backward, y in
// forward) as its pixel (r, col) and the offsets of its (n, c) plane in x and in y; pixel
// (h, w) of that plane lies at x_off + (h * W + w) * step. One division per level.
template <class I> struct Pixel { I r, col, x_off, y_off; };

template <bool kInX, class I>
__device__ __forceinline__ Pixel<I> locate(const Dims<I>& d, I i) {
  I c = 0;
  if (d.nhwc) {
    const I t = d.div_c(i);
    c = i - t * d.c;
    i = t;
  }
  const I plane = (kInX ? d.div_hw : d.div_pq)(i);
  const I pos = i - plane * (kInX ? d.h * d.w : d.p * d.q);
  const I r = (kInX ? d.div_w : d.div_q)(pos);
  return {r, pos - r * (kInX ? d.w : d.q), plane * d.x_plane + c, plane * d.y_plane + c};
}

// First maximum of the window with top-left (h0, w0), clipped to the input, in row-major
// order (a NaN wins, the first one), as the pixel offset h * W + w; -1 if the window is
// empty. x points at the (n, c) plane.
template <class T, class I>
__device__ __forceinline__ I window_argmax(const Dims<I>& d, const T* x, I h0, I w0,
                                           float& best) {
  const I h1 = min(h0 + d.kh, d.h), w1 = min(w0 + d.kw, d.w);
  I arg = -1;
  best = -INFINITY;
  for (I h = max(h0, I(0)); h < h1; ++h)
    for (I w = max(w0, I(0)); w < w1; ++w) {
      const float v = to_f32(x[(h * d.w + w) * d.step]);
      if (arg < 0 || v > best || (isnan(v) && !isnan(best))) {
        best = v;
        arg = h * d.w + w;
      }
    }
  return arg;
}

// The windows [lo, hi) along one axis that cover padded coordinate hp (window k spans
// [k * stride, k * stride + kernel)). The last one starts at hp / stride; when windows do
// not overlap (kernel <= stride) it is the only candidate, so no second division.
template <class I>
__device__ __forceinline__ void covering(I hp, I kernel, I stride, const Div<I>& div_stride,
                                         I count, I& lo, I& hi) {
  const I last = div_stride(hp);
  hi = min(last + 1, count);
  if (kernel <= stride) lo = hp - last * stride < kernel ? last : last + 1;
  else lo = hp < kernel ? 0 : div_stride(hp - kernel) + 1;
}

// window_argmax for V adjacent channels of an nhwc pixel at once (16-byte loads): the same
// rule per channel. x points at the first of the channels in image n.
template <class T, class I>
__device__ __forceinline__ void window_argmax_vec(const Dims<I>& d, const T* x, I h0, I w0,
                                                  float (&best)[kVec<T>], I (&arg)[kVec<T>]) {
  constexpr int V = kVec<T>;
  const I h1 = min(h0 + d.kh, d.h), w1 = min(w0 + d.kw, d.w);
#pragma unroll
  for (int k = 0; k < V; ++k) {
    arg[k] = -1;
    best[k] = -INFINITY;
  }
  for (I h = max(h0, I(0)); h < h1; ++h)
    for (I w = max(w0, I(0)); w < w1; ++w) {
      float v[V];
      load_vec(x + (h * d.w + w) * d.c, v);
#pragma unroll
      for (int k = 0; k < V; ++k)
        if (arg[k] < 0 || v[k] > best[k] || (isnan(v[k]) && !isnan(best[k]))) {
          best[k] = v[k];
          arg[k] = h * d.w + w;
        }
    }
}

}  // namespace

// ---- kernels ------------------------------------------------------------------------------

template <class T, class I>
__global__ void pool_forward_kernel(Dims<I> d, const T* __restrict__ x, T* __restrict__ y,
                                    int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const Pixel<I> at = locate<false>(d, I(i));
    const T* xp = x + at.x_off;
    const I h0 = at.r * d.sh - d.ph, w0 = at.col * d.sw - d.pw;
    float r;
    if (d.max) {
      float best;
      r = window_argmax(d, xp, h0, w0, best) >= 0 ? best : 0.f;
    } else {
      const I h1 = min(h0 + d.kh, d.h), w1 = min(w0 + d.kw, d.w);
      float sum = 0.f;
      I count = 0;
      for (I h = max(h0, I(0)); h < h1; ++h)
        for (I w = max(w0, I(0)); w < w1; ++w, ++count) sum += to_f32(xp[(h * d.w + w) * d.step]);
      r = count > 0 ? sum / static_cast<float>(count) : 0.f;
    }
    y[i] = from_f32<T>(r);
  }
}

template <class T, class I>
__global__ void pool_backward_kernel(Dims<I> d, const T* __restrict__ x, const T* __restrict__ dy,
                                     T* __restrict__ dx, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const Pixel<I> at = locate<true>(d, I(i));
    const T* xp = x + at.x_off;
    const T* dyp = dy + at.y_off;
    I p0, p1, q0, q1;
    covering(at.r + d.ph, d.kh, d.sh, d.div_sh, d.p, p0, p1);
    covering(at.col + d.pw, d.kw, d.sw, d.div_sw, d.q, q0, q1);
    const I self = at.r * d.w + at.col;
    float g = 0.f;
    for (I p = p0; p < p1; ++p)
      for (I q = q0; q < q1; ++q) {
        const I h0 = p * d.sh - d.ph, w0 = q * d.sw - d.pw;
        const I o = (p * d.q + q) * d.step;
        if (d.max) {
          float best;
          if (window_argmax(d, xp, h0, w0, best) == self) g += to_f32(dyp[o]);
        } else {
          const I hc = min(h0 + d.kh, d.h) - max(h0, I(0));
          const I wc = min(w0 + d.kw, d.w) - max(w0, I(0));
          g += to_f32(dyp[o]) / static_cast<float>(hc * wc);
        }
      }
    dx[i] = from_f32<T>(g);
  }
}

// nhwc with C a multiple of the vector width and 32-bit indices: one thread per pixel and V
// adjacent channels, 16-byte loads and stores; the same results as the kernels above.
// V window positions of max pooling's argmax, one byte each (row-major in the window; 255 for
// an empty window): what a training forward records for the backward.
template <int V>
struct alignas(V) WindowIndex {
  uint8_t k[V];
};
constexpr uint8_t kNoIndex = 255;

template <class T>
__global__ void pool_forward_nhwc_vec(Dims<int32_t> d, const T* __restrict__ x, T* __restrict__ y,
                                      uint8_t* __restrict__ argmax, int32_t total_vec) {
  constexpr int V = kVec<T>;
  for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total_vec; i += gridDim.x * blockDim.x) {
    // Through the dividers, not `/` and `%` by runtime sizes (emulated, tens of instructions
    // each); y and the argmax are nhwc, so this thread's vector is at element i * V of both.
    const Pixel<int32_t> px = locate<false>(d, i * V);
    const T* xp = x + px.x_off;
    const int32_t h0 = px.r * d.sh - d.ph, w0 = px.col * d.sw - d.pw;
    float out[V];
    if (d.max) {
      int32_t arg[V];
      window_argmax_vec(d, xp, h0, w0, out, arg);
#pragma unroll
      for (int k = 0; k < V; ++k)
        if (arg[k] < 0) out[k] = 0.f;
      if (argmax) {
        WindowIndex<V> at;
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const int32_t h = d.div_w(max(arg[k], 0));
          at.k[k] = arg[k] < 0 ? kNoIndex : uint8_t((h - h0) * d.kw + (arg[k] - h * d.w - w0));
        }
        *reinterpret_cast<WindowIndex<V>*>(argmax + int64_t(i) * V) = at;
      }
    } else {
      const int32_t h1 = min(h0 + d.kh, d.h), w1 = min(w0 + d.kw, d.w);
#pragma unroll
      for (int k = 0; k < V; ++k) out[k] = 0.f;
      int32_t count = 0;
      for (int32_t h = max(h0, 0); h < h1; ++h)
        for (int32_t w = max(w0, 0); w < w1; ++w, ++count) {
          float v[V];
          load_vec(xp + (h * d.w + w) * d.c, v);
#pragma unroll
          for (int k = 0; k < V; ++k) out[k] += v[k];
        }
#pragma unroll
      for (int k = 0; k < V; ++k) out[k] = count > 0 ? out[k] / static_cast<float>(count) : 0.f;
    }
    store_vec(y + int64_t(i) * V, out);
  }
}

// Max pooling's output y tells each window's maximum, so an element takes a window's gradient
// only if it equals that maximum and no element before it in the window does (the first one,
// as window_argmax picks): one load of the window's maximum per window instead of its whole
// argmax, and a scan of the earlier elements only on a tie (common after a ReLU: windows of
// zeros). NaN matches NaN, as the first NaN wins.
template <class T>
__global__ void pool_backward_nhwc_vec(Dims<int32_t> d, const T* __restrict__ x, const T* __restrict__ y,
                                       const T* __restrict__ dy, T* __restrict__ dx, int32_t total_vec) {
  constexpr int V = kVec<T>;
  const int32_t cvecs = d.c / V;
  const auto same = [](float a, float b) { return a == b || (isnan(a) && isnan(b)); };
  for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total_vec; i += gridDim.x * blockDim.x) {
    const int32_t cv = i % cvecs, pix = i / cvecs;
    const int32_t col = pix % d.w, r = (pix / d.w) % d.h, n = pix / (d.h * d.w);
    const T* xp = x + n * d.x_plane + cv * V;
    const T* yp = y + n * d.y_plane + cv * V;
    const T* dyp = dy + n * d.y_plane + cv * V;
    int32_t p0, p1, q0, q1;
    covering(r + d.ph, d.kh, d.sh, d.div_sh, d.p, p0, p1);
    covering(col + d.pw, d.kw, d.sw, d.div_sw, d.q, q0, q1);
    float g[V], self[V];
#pragma unroll
    for (int k = 0; k < V; ++k) g[k] = 0.f;
    if (d.max) load_vec(xp + (r * d.w + col) * d.c, self);
    for (int32_t p = p0; p < p1; ++p)
      for (int32_t q = q0; q < q1; ++q) {
        const int32_t h0 = p * d.sh - d.ph, w0 = q * d.sw - d.pw;
        const int32_t o = (p * d.q + q) * d.c;
        if (d.max) {
          float m[V];
          load_vec(yp + o, m);
          bool hit[V], any = false;
#pragma unroll
          for (int k = 0; k < V; ++k) any |= hit[k] = same(self[k], m[k]);
          if (!any) continue;
          // The elements before this one in the window, row-major: a tie there takes it.
          for (int32_t h = max(h0, 0); h <= r && any; ++h)
            for (int32_t w = max(w0, 0); w < (h == r ? col : min(w0 + d.kw, d.w)); ++w) {
              float v[V];
              load_vec(xp + (h * d.w + w) * d.c, v);
              any = false;
#pragma unroll
              for (int k = 0; k < V; ++k) any |= hit[k] = hit[k] && !same(v[k], m[k]);
              if (!any) break;
            }
          if (!any) continue;
          float gy[V];
          load_vec(dyp + o, gy);
#pragma unroll
          for (int k = 0; k < V; ++k)
            if (hit[k]) g[k] += gy[k];
        } else {
          float gy[V];
          load_vec(dyp + o, gy);
          const int32_t hc = min(h0 + d.kh, d.h) - max(h0, 0);
          const int32_t wc = min(w0 + d.kw, d.w) - max(w0, 0);
#pragma unroll
          for (int k = 0; k < V; ++k) g[k] += gy[k] / static_cast<float>(hc * wc);
        }
      }
    store_vec(dx + int64_t(pix) * d.c + cv * V, g);
  }
}

// Max pooling's backward from the forward's recorded argmax (WindowIndex): an element takes a
// window's gradient where the window's index names its position. Two small loads per covering
// window, no scan of x: the scan above ran at an eighth of the H200's bandwidth on ResNet's stem.
template <class T>
__global__ void pool_backward_nhwc_argmax(Dims<int32_t> d, const uint8_t* __restrict__ argmax,
                                          const T* __restrict__ dy, T* __restrict__ dx, int32_t total_vec) {
  constexpr int V = kVec<T>;
  for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total_vec; i += gridDim.x * blockDim.x) {
    const Pixel<int32_t> px = locate<true>(d, i * V);  // as in pool_forward_nhwc_vec
    const int32_t r = px.r, col = px.col;
    int32_t p0, p1, q0, q1;
    covering(r + d.ph, d.kh, d.sh, d.div_sh, d.p, p0, p1);
    covering(col + d.pw, d.kw, d.sw, d.div_sw, d.q, q0, q1);
    float g[V];
#pragma unroll
    for (int k = 0; k < V; ++k) g[k] = 0.f;
    for (int32_t p = p0; p < p1; ++p)
      for (int32_t q = q0; q < q1; ++q) {
        const int32_t self = (r - (p * d.sh - d.ph)) * d.kw + (col - (q * d.sw - d.pw));
        const int64_t o = int64_t(px.y_off) + (p * d.q + q) * d.c;
        const WindowIndex<V> at = *reinterpret_cast<const WindowIndex<V>*>(argmax + o);
        bool any = false;
#pragma unroll
        for (int k = 0; k < V; ++k) any |= at.k[k] == self;
        if (!any) continue;
        float gy[V];
        load_vec(dy + o, gy);
#pragma unroll
        for (int k = 0; k < V; ++k)
          if (at.k[k] == self) g[k] += gy[k];
      }
    store_vec(dx + int64_t(i) * V, g);
  }
}

// ---- launchers ----------------------------------------------------------------------------

namespace {
// Whether the 16-byte nhwc kernels apply: nhwc, C a multiple of the width, aligned, 32-bit.
template <class T>
bool nhwc_vectorizable(const PoolShape& s, std::initializer_list<const void*> pointers) {
  return s.nhwc && s.c % kVec<T> == 0 && fits_int32(s) && vectorizable<T>(s.c, pointers);
}
}  // namespace

bool pool2d_records_argmax(const PoolShape& s, Dt dt) {
  if (!s.max || int64_t(s.kernel_h) * s.kernel_w >= kNoIndex) return false;
  bool ok = false;
  dispatch_float(dt, "pool2d_records_argmax", [&](auto t) {
    using T = decltype(t);
    ok = s.nhwc && s.c % kVec<T> == 0 && fits_int32(s);
  });
  return ok;
}

bool pool2d_forward(const PoolShape& s, Dt dt, const void* x, void* y, cudaStream_t stream, uint8_t* argmax) {
  const int64_t total = s.n * s.c * s.p * s.q;
  if (total == 0) return false;
  bool recorded = false;
  dispatch_float(dt, "pool2d_forward", [&](auto t) {
    using T = decltype(t);
    if (nhwc_vectorizable<T>(s, {x, y, argmax})) {
      const int64_t total_vec = total / kVec<T>;
      recorded = argmax && pool2d_records_argmax(s, dt);
      pool_forward_nhwc_vec<T><<<grid_for(total_vec), kThreads, 0, stream>>>(
          make_dims<int32_t>(s), static_cast<const T*>(x), static_cast<T*>(y), recorded ? argmax : nullptr,
          static_cast<int32_t>(total_vec));
      CONVOY_LAUNCH_CHECK(pool_forward_nhwc_vec);
      return;
    }
    dispatch_index(s, [&](const auto& d) {
      pool_forward_kernel<<<grid_for(total), kThreads, 0, stream>>>(
          d, static_cast<const T*>(x), static_cast<T*>(y), total);
    });
    CONVOY_LAUNCH_CHECK(pool_forward_kernel);
  });
  return recorded;
}

void pool2d_backward(const PoolShape& s, Dt dt, const void* x, const void* y, const void* dy, void* dx,
                     cudaStream_t stream, const uint8_t* argmax) {
  const int64_t total = s.n * s.c * s.h * s.w;
  if (total == 0) return;
  dispatch_float(dt, "pool2d_backward", [&](auto t) {
    using T = decltype(t);
    if (argmax && nhwc_vectorizable<T>(s, {dy, dx, argmax})) {
      const int64_t total_vec = total / kVec<T>;
      pool_backward_nhwc_argmax<T><<<grid_for(total_vec), kThreads, 0, stream>>>(
          make_dims<int32_t>(s), argmax, static_cast<const T*>(dy), static_cast<T*>(dx),
          static_cast<int32_t>(total_vec));
      CONVOY_LAUNCH_CHECK(pool_backward_nhwc_argmax);
      return;
    }
    if (nhwc_vectorizable<T>(s, {x, y, dy, dx})) {
      const int64_t total_vec = total / kVec<T>;
      pool_backward_nhwc_vec<T><<<grid_for(total_vec), kThreads, 0, stream>>>(
          make_dims<int32_t>(s), static_cast<const T*>(x), static_cast<const T*>(y), static_cast<const T*>(dy),
          static_cast<T*>(dx), static_cast<int32_t>(total_vec));
      CONVOY_LAUNCH_CHECK(pool_backward_nhwc_vec);
      return;
    }
    dispatch_index(s, [&](const auto& d) {
      pool_backward_kernel<<<grid_for(total), kThreads, 0, stream>>>(
          d, static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), total);
    });
    CONVOY_LAUNCH_CHECK(pool_backward_kernel);
  });
}

}  // namespace convoy::kernels
