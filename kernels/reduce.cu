// Per-channel reductions over a tensor viewed as (outer, C, inner) — nchw is (N, C, H*W),
// nhwc and (N, C) matrices are (N*H*W, C, 1) — and the batch-norm kernels built on them.
// Partial sums go to scratch per split and are added in a fixed order, so results are
// deterministic run to run. Accumulation is in double.
#include <algorithm>

#include "kernels/common.cuh"

namespace convoy::kernels {

namespace {

enum class Stat : int { sum = 0, moments = 1, backward = 2 };

// How many splits of `outer` each channel's reduction uses.
int64_t reduce_splits(int64_t outer, int64_t channels, int64_t inner) {
  const int64_t per_channel = outer * inner;
  const int64_t tiles = inner == 1 ? (channels + 31) / 32 : channels;
  int64_t s = std::max<int64_t>(1, 1024 / std::max<int64_t>(1, tiles));
  s = std::min<int64_t>(s, std::max<int64_t>(1, per_channel / 2048));
  s = std::min<int64_t>(s, std::max<int64_t>(1, outer));
  return std::max<int64_t>(1, std::min<int64_t>(s, 1024));
}

}  // namespace

// ---- kernels ------------------------------------------------------------------------------

// One block per (channel, split) for inner > 1; threads walk the split's (outer, inner)
// elements, consecutive threads on consecutive inner positions.
template <Stat S, class T>
__global__ void channel_partials_strided(const T* __restrict__ x, const T* __restrict__ dy,
                                         const float* __restrict__ mean, double* __restrict__ part,
                                         int64_t outer, int64_t channels, int64_t inner,
                                         int64_t rows_per_split) {
  const int64_t c = blockIdx.x, s = blockIdx.y;
  const int64_t o0 = s * rows_per_split, o1 = min(outer, o0 + rows_per_split);
  const int64_t count = (o1 > o0 ? o1 - o0 : 0) * inner;
  const float mu = S == Stat::backward ? mean[c] : 0.f;
  double a = 0, b = 0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const int64_t o = o0 + j / inner, i = j % inner;
    const int64_t idx = (o * channels + c) * inner + i;
    if constexpr (S == Stat::sum) {
      a += to_f32(x[idx]);
    } else if constexpr (S == Stat::moments) {
      const double v = to_f32(x[idx]);
      a += v;
      b += v * v;
    } else {
      const double g = to_f32(dy[idx]);
      a += g;
      b += g * (to_f32(x[idx]) - mu);
    }
  }
  a = block_sum(a);
  if constexpr (S != Stat::sum) b = block_sum(b);
  if (threadIdx.x == 0) {
    part[(s * channels + c) * 2] = a;
    part[(s * channels + c) * 2 + 1] = b;
  }
}

// inner == 1: a block of 32 x 8 threads covers 32 adjacent channels (coalesced) and a
// split's rows, 8 at a time; the 8 row sums are added in shared memory.
template <Stat S, class T>
__global__ void channel_partials_rows(const T* __restrict__ x, const T* __restrict__ dy,
                                      const float* __restrict__ mean, double* __restrict__ part,
                                      int64_t outer, int64_t channels, int64_t rows_per_split) {
  __shared__ double sa[8][33], sb[8][33];
  const int64_t c = blockIdx.x * 32 + threadIdx.x, s = blockIdx.y;
  const int64_t o0 = s * rows_per_split, o1 = min(outer, o0 + rows_per_split);
  double a = 0, b = 0;
  if (c < channels) {
    const float mu = S == Stat::backward ? mean[c] : 0.f;
    for (int64_t o = o0 + threadIdx.y; o < o1; o += 8) {
      const int64_t idx = o * channels + c;
      if constexpr (S == Stat::sum) {
        a += to_f32(x[idx]);
      } else if constexpr (S == Stat::moments) {
        const double v = to_f32(x[idx]);
        a += v;
        b += v * v;
      } else {
        const double g = to_f32(dy[idx]);
        a += g;
        b += g * (to_f32(x[idx]) - mu);
      }
    }
  }
  sa[threadIdx.y][threadIdx.x] = a;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && c < channels) {
    for (int r = 1; r < 8; ++r) {
      a += sa[r][threadIdx.x];
      b += sb[r][threadIdx.x];
    }
    part[(s * channels + c) * 2] = a;
    part[(s * channels + c) * 2 + 1] = b;
  }
}

template <class O>
__global__ void channel_sum_finalize(const double* __restrict__ part, int64_t splits,
                                     int64_t channels, O* __restrict__ out) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= channels) return;
  double a = 0;
  for (int64_t s = 0; s < splits; ++s) a += part[(s * channels + c) * 2];
  out[c] = from_f32<O>(static_cast<float>(a));
}

// Batch statistics -> saved mean/invstd, running stats, and the affine coefficients
// y = x * coef[c] + coef[C + c].
__global__ void bn_train_finalize(const double* __restrict__ part, int64_t splits,
                                  int64_t channels, double count, const float* __restrict__ gamma,
                                  const float* __restrict__ beta, float momentum, float eps,
                                  float* __restrict__ running_mean, float* __restrict__ running_var,
                                  float* __restrict__ saved_mean, float* __restrict__ saved_invstd,
                                  float* __restrict__ coef) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= channels) return;
  double a = 0, b = 0;
  for (int64_t s = 0; s < splits; ++s) {
    a += part[(s * channels + c) * 2];
    b += part[(s * channels + c) * 2 + 1];
  }
  const double mean = a / count;
  const double var = fmax(b / count - mean * mean, 0.0);
  const float invstd = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
  saved_mean[c] = static_cast<float>(mean);
  saved_invstd[c] = invstd;
  const double unbiased = count > 1 ? var * count / (count - 1) : var;
  running_mean[c] = static_cast<float>((1.0 - momentum) * running_mean[c] + momentum * mean);
  running_var[c] = static_cast<float>((1.0 - momentum) * running_var[c] + momentum * unbiased);
  const float scale = gamma[c] * invstd;
  coef[c] = scale;
  coef[channels + c] = beta[c] - static_cast<float>(mean) * scale;
}

// dgamma, dbeta, and dx = k1 (dy - k2 - (x - mean) k3).
__global__ void bn_backward_finalize(const double* __restrict__ part, int64_t splits,
                                     int64_t channels, double count,
                                     const float* __restrict__ gamma,
                                     const float* __restrict__ saved_invstd,
                                     float* __restrict__ dgamma, float* __restrict__ dbeta,
                                     float* __restrict__ coef) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= channels) return;
  double a = 0, b = 0;
  for (int64_t s = 0; s < splits; ++s) {
    a += part[(s * channels + c) * 2];
    b += part[(s * channels + c) * 2 + 1];
  }
  const double invstd = saved_invstd[c];
  dbeta[c] = static_cast<float>(a);
  dgamma[c] = static_cast<float>(b * invstd);
  coef[c] = static_cast<float>(gamma[c] * invstd);
  coef[channels + c] = static_cast<float>(a / count);
  coef[2 * channels + c] = static_cast<float>(invstd * invstd * b / count);
}

template <class T>
__global__ void bn_apply(const T* x, T* y, const float* coef,
                         int64_t channels, int64_t inner, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (i / inner) % channels;
    y[i] = from_f32<T>(to_f32(x[i]) * coef[c] + coef[channels + c]);
  }
}

template <class T>
__global__ void bn_eval_kernel(const T* x, T* y,
                               const float* gamma, const float* beta,
                               const float* mean, const float* var,
                               float eps, int64_t channels, int64_t inner, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (i / inner) % channels;
    const float invstd = 1.f / sqrtf(var[c] + eps);
    y[i] = from_f32<T>((to_f32(x[i]) - mean[c]) * invstd * gamma[c] + beta[c]);
  }
}

template <class T>
__global__ void bn_backward_apply(const T* x, const T* dy,
                                  T* dx, const float* mean,
                                  const float* coef, int64_t channels, int64_t inner,
                                  int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (i / inner) % channels;
    const float k1 = coef[c], k2 = coef[channels + c], k3 = coef[2 * channels + c];
    dx[i] = from_f32<T>(k1 * (to_f32(dy[i]) - k2 - (to_f32(x[i]) - mean[c]) * k3));
  }
}

// ---- launchers ----------------------------------------------------------------------------

size_t channel_reduce_scratch_bytes(int64_t outer, int64_t channels, int64_t inner) {
  const int64_t s = reduce_splits(outer, channels, inner);
  // partials (2 doubles per split and channel), then up to 3 floats of coefficients
  return static_cast<size_t>(s * channels * 2) * sizeof(double) +
         static_cast<size_t>(3 * channels) * sizeof(float) + 256;
}

namespace {

template <Stat S, class T>
int64_t launch_partials(const T* x, const T* dy, const float* mean, double* part, int64_t outer,
                        int64_t channels, int64_t inner, cudaStream_t stream) {
  const int64_t splits = reduce_splits(outer, channels, inner);
  const int64_t rows = (outer + splits - 1) / splits;
  if (inner == 1) {
    dim3 grid(static_cast<unsigned>((channels + 31) / 32), static_cast<unsigned>(splits));
    channel_partials_rows<S, T><<<grid, dim3(32, 8), 0, stream>>>(x, dy, mean, part, outer,
                                                                   channels, rows);
    CONVOY_LAUNCH_CHECK(channel_partials_rows);
  } else {
    dim3 grid(static_cast<unsigned>(channels), static_cast<unsigned>(splits));
    channel_partials_strided<S, T><<<grid, kThreads, 0, stream>>>(x, dy, mean, part, outer,
                                                                   channels, inner, rows);
    CONVOY_LAUNCH_CHECK(channel_partials_strided);
  }
  return splits;
}

float* coef_area(void* scratch, int64_t outer, int64_t channels, int64_t inner) {
  const int64_t s = reduce_splits(outer, channels, inner);
  return reinterpret_cast<float*>(static_cast<char*>(scratch) + s * channels * 2 * sizeof(double));
}

unsigned channel_blocks(int64_t channels) { return static_cast<unsigned>((channels + 255) / 256); }

}  // namespace

void channel_sum(Dt dt, const void* x, Dt out_dt, void* out, int64_t outer, int64_t channels,
                 int64_t inner, void* scratch, cudaStream_t stream) {
  if (channels == 0) return;
  if (outer * inner == 0) {
    fill(out_dt, out, 0.f, channels, stream);
    return;
  }
  auto* part = static_cast<double*>(scratch);
  dispatch_float(dt, "channel_sum", [&](auto t) {
    using T = decltype(t);
    const int64_t splits = launch_partials<Stat::sum, T>(static_cast<const T*>(x), nullptr, nullptr,
                                                         part, outer, channels, inner, stream);
    dispatch_float(out_dt, "channel_sum (output)", [&](auto o) {
      using O = decltype(o);
      channel_sum_finalize<O><<<channel_blocks(channels), 256, 0, stream>>>(part, splits, channels,
                                                                             static_cast<O*>(out));
      CONVOY_LAUNCH_CHECK(channel_sum_finalize);
    });
  });
}

void batchnorm_forward_train(Dt dt, const void* x, const float* gamma, const float* beta,
                             float momentum, float eps, float* running_mean, float* running_var,
                             void* y, float* saved_mean, float* saved_invstd, int64_t outer,
                             int64_t channels, int64_t inner, void* scratch, cudaStream_t stream) {
  const int64_t n = outer * channels * inner;
  if (n == 0) return;
  auto* part = static_cast<double*>(scratch);
  float* coef = coef_area(scratch, outer, channels, inner);
  dispatch_float(dt, "batchnorm_forward_train", [&](auto t) {
    using T = decltype(t);
    const int64_t splits = launch_partials<Stat::moments, T>(
        static_cast<const T*>(x), nullptr, nullptr, part, outer, channels, inner, stream);
    bn_train_finalize<<<channel_blocks(channels), 256, 0, stream>>>(
        part, splits, channels, static_cast<double>(outer * inner), gamma, beta, momentum, eps,
        running_mean, running_var, saved_mean, saved_invstd, coef);
    CONVOY_LAUNCH_CHECK(bn_train_finalize);
    bn_apply<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                      coef, channels, inner, n);
    CONVOY_LAUNCH_CHECK(bn_apply);
  });
}

void batchnorm_forward_eval(Dt dt, const void* x, const float* gamma, const float* beta,
                            const float* running_mean, const float* running_var, float eps,
                            void* y, int64_t outer, int64_t channels, int64_t inner,
                            cudaStream_t stream) {
  const int64_t n = outer * channels * inner;
  if (n == 0) return;
  dispatch_float(dt, "batchnorm_forward_eval", [&](auto t) {
    using T = decltype(t);
    bn_eval_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), gamma, beta, running_mean, running_var, eps,
        channels, inner, n);
    CONVOY_LAUNCH_CHECK(bn_eval_kernel);
  });
}

void batchnorm_backward(Dt dt, const void* x, const void* dy, const float* gamma,
                        const float* saved_mean, const float* saved_invstd, void* dx,
                        float* dgamma, float* dbeta, int64_t outer, int64_t channels,
                        int64_t inner, void* scratch, cudaStream_t stream) {
  const int64_t n = outer * channels * inner;
  if (n == 0) return;
  auto* part = static_cast<double*>(scratch);
  float* coef = coef_area(scratch, outer, channels, inner);
  dispatch_float(dt, "batchnorm_backward", [&](auto t) {
    using T = decltype(t);
    const int64_t splits = launch_partials<Stat::backward, T>(
        static_cast<const T*>(x), static_cast<const T*>(dy), saved_mean, part, outer, channels,
        inner, stream);
    bn_backward_finalize<<<channel_blocks(channels), 256, 0, stream>>>(
        part, splits, channels, static_cast<double>(outer * inner), gamma, saved_invstd, dgamma,
        dbeta, coef);
    CONVOY_LAUNCH_CHECK(bn_backward_finalize);
    if (dx) {
      bn_backward_apply<T><<<grid_for(n), kThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), saved_mean,
          coef, channels, inner, n);
      CONVOY_LAUNCH_CHECK(bn_backward_apply);
    }
  });
}

}  // namespace convoy::kernels
