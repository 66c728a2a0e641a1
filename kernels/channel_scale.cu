// Squeeze-and-excitation's channel-wise product and its scale gradient. The product is
// elementwise with one factor per (sample, channel); the gradient sums a plane: in nchw a plane
// is contiguous (one block each), in nhwc its elements are c apart (a block covers 32 adjacent
// channels of one sample, so each row's reads are coalesced).
#include "kernels/channel_scale.cuh"
#include "kernels/common.cuh"

namespace convoy::kernels {

// ---- kernels ------------------------------------------------------------------------------

template <class T>
__global__ void channel_scale_kernel(const T* __restrict__ x, const T* __restrict__ s, T* __restrict__ y,
                                     int64_t total, int64_t c, int64_t hw, bool nhwc) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    // The (sample, channel) of element i: nchw i = plane * hw + k; nhwc i = (n * hw + k) * c + ch.
    const int64_t plane = nhwc ? (i / (hw * c)) * c + i % c : i / hw;
    y[i] = from_f32<T>(to_f32(x[i]) * to_f32(s[plane]));
  }
}

// nchw: block `plane` sums its contiguous hw products.
template <class T>
__global__ void channel_scale_grad_planes(const T* __restrict__ x, const T* __restrict__ dy, T* __restrict__ ds,
                                          int64_t hw) {
  const int64_t plane = blockIdx.x;
  const T* xp = x + plane * hw;
  const T* gp = dy + plane * hw;
  double sum = 0;
  for (int64_t k = threadIdx.x; k < hw; k += blockDim.x) sum += double(to_f32(xp[k])) * to_f32(gp[k]);
  sum = block_sum(sum);
  if (threadIdx.x == 0) ds[plane] = from_f32<T>(static_cast<float>(sum));
}

// nhwc: block (channel tile, sample) of 32 x 8 threads; thread (tx, ty) sums rows ty, ty + 8, ...
// of channel tile * 32 + tx, and the 8 row sums are added in shared memory.
template <class T>
__global__ void channel_scale_grad_rows(const T* __restrict__ x, const T* __restrict__ dy, T* __restrict__ ds,
                                        int64_t c, int64_t hw) {
  __shared__ double partial[8][33];
  const int64_t ch = blockIdx.x * 32 + threadIdx.x, n = blockIdx.y;
  double sum = 0;
  if (ch < c)
    for (int64_t k = threadIdx.y; k < hw; k += 8) {
      const int64_t idx = (n * hw + k) * c + ch;
      sum += double(to_f32(x[idx])) * to_f32(dy[idx]);
    }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && ch < c) {
    for (int r = 1; r < 8; ++r) sum += partial[r][threadIdx.x];
    ds[n * c + ch] = from_f32<T>(static_cast<float>(sum));
  }
}

// ---- launchers ----------------------------------------------------------------------------

void channel_scale(Dt dt, const void* x, const void* s, void* y, int64_t n, int64_t c, int64_t hw, bool nhwc,
                   cudaStream_t stream) {
  const int64_t total = n * c * hw;
  if (total == 0) return;
  dispatch_float(dt, "channel_scale", [&](auto t) {
    using T = decltype(t);
    channel_scale_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(s), static_cast<T*>(y), total, c, hw, nhwc);
    CONVOY_LAUNCH_CHECK(channel_scale_kernel);
  });
}

void channel_scale_grad(Dt dt, const void* x, const void* dy, void* ds, int64_t n, int64_t c, int64_t hw, bool nhwc,
                        cudaStream_t stream) {
  if (n * c == 0) return;
  dispatch_float(dt, "channel_scale_grad", [&](auto t) {
    using T = decltype(t);
    const auto* px = static_cast<const T*>(x);
    const auto* pg = static_cast<const T*>(dy);
    auto* ps = static_cast<T*>(ds);
    if (nhwc) {
      const dim3 grid(static_cast<unsigned>((c + 31) / 32), static_cast<unsigned>(n));
      channel_scale_grad_rows<T><<<grid, dim3(32, 8), 0, stream>>>(px, pg, ps, c, hw);
      CONVOY_LAUNCH_CHECK(channel_scale_grad_rows);
    } else {
      channel_scale_grad_planes<T><<<static_cast<unsigned>(n * c), kThreads, 0, stream>>>(px, pg, ps, hw);
      CONVOY_LAUNCH_CHECK(channel_scale_grad_planes);
    }
  });
}

}  // namespace convoy::kernels
