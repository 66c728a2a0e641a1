// Bias add (forward) and the bias gradient (backward) over the (outer, C, inner) view that
// nchw (N, C, H*W), nhwc (N*H*W, C, 1) and (N, C) matrices all reduce to.
#include "kernels/bias.cuh"
#include "kernels/channel_reduce.cuh"
#include "kernels/common.cuh"
#include "kernels/elementwise.cuh"

namespace convoy::kernels {

// ---- kernels ------------------------------------------------------------------------------

template <class T, class B>
__global__ void bias_add_kernel(T* __restrict__ y, const B* __restrict__ b, int64_t channels,
                                int64_t inner, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (i / inner) % channels;
    y[i] = from_f32<T>(to_f32(y[i]) + to_f32(b[c]));
  }
}

// The partials (channel_reduce.cuh, Stat::sum) added per channel in a fixed order.
template <class O>
__global__ void channel_sum_finalize(const double* __restrict__ part, int64_t splits,
                                     int64_t channels, O* __restrict__ out) {
  double a, unused;
  if (!sum_splits(part, splits, channels, a, unused)) return;
  out[blockIdx.x * 32 + threadIdx.x] = from_f32<O>(static_cast<float>(a));
}

// ---- launchers ----------------------------------------------------------------------------

void bias_add(Dt dt, void* y, Dt bias_dt, const void* b, int64_t outer, int64_t channels,
              int64_t inner, cudaStream_t stream) {
  const int64_t n = outer * channels * inner;
  if (n == 0) return;
  dispatch_float(dt, "bias_add", [&](auto t) {
    using T = decltype(t);
    dispatch_float(bias_dt, "bias_add (bias)", [&](auto bt) {
      using B = decltype(bt);
      bias_add_kernel<T, B><<<grid_for(n), kThreads, 0, stream>>>(
          static_cast<T*>(y), static_cast<const B*>(b), channels, inner, n);
      CONVOY_LAUNCH_CHECK(bias_add_kernel);
    });
  });
}

size_t bias_grad_scratch_bytes(int64_t outer, int64_t channels, int64_t inner) {
  return channel_reduce_scratch_bytes(outer, channels, inner);
}

void bias_grad(Dt dt, const void* dy, Dt db_dt, void* db, int64_t outer, int64_t channels,
               int64_t inner, void* scratch, cudaStream_t stream) {
  if (channels == 0) return;
  if (outer * inner == 0) {
    fill(db_dt, db, 0.f, channels, stream);
    return;
  }
  auto* part = static_cast<double*>(scratch);
  dispatch_float(dt, "bias_grad", [&](auto t) {
    using T = decltype(t);
    const int64_t splits = launch_partials<Stat::sum, T>(static_cast<const T*>(dy), nullptr, nullptr,
                                                         part, outer, channels, inner, stream);
    dispatch_float(db_dt, "bias_grad (output)", [&](auto o) {
      using O = decltype(o);
      channel_sum_finalize<O><<<channel_blocks(channels), finalize_block(), 0, stream>>>(part, splits, channels,
                                                                             static_cast<O*>(db));
      CONVOY_LAUNCH_CHECK(channel_sum_finalize);
    });
  });
}

}  // namespace convoy::kernels
