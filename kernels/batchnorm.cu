// Batch norm, training forward, eval forward and backward, per channel over the
// (outer, C, inner) view (channel_reduce.cuh): the batch statistics come from the
// deterministic double-precision partials there; per-channel arrays are f32.
#include "kernels/batchnorm.cuh"

#include <type_traits>

#include "kernels/channel_reduce.cuh"
#include "kernels/common.cuh"
#include "kernels/vec.cuh"

namespace convoy::kernels {

// ---- kernels ------------------------------------------------------------------------------

// Batch statistics -> saved mean/invstd, running stats, and the affine coefficients
// y = x * coef[c] + coef[C + c].
__global__ void bn_train_finalize(const double* __restrict__ part, int64_t splits,
                                  int64_t channels, double count, const float* __restrict__ gamma,
                                  const float* __restrict__ beta, float momentum, float eps,
                                  float* __restrict__ running_mean, float* __restrict__ running_var,
                                  float* __restrict__ saved_mean, float* __restrict__ saved_invstd,
                                  float* __restrict__ coef) {
  double a, b;
  if (!sum_splits(part, splits, channels, a, b)) return;
  const int64_t c = blockIdx.x * 32 + threadIdx.x;
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
  double a, b;
  if (!sum_splits(part, splits, channels, a, b)) return;
  const int64_t c = blockIdx.x * 32 + threadIdx.x;
  const double invstd = saved_invstd[c];
  dbeta[c] = static_cast<float>(a);
  dgamma[c] = static_cast<float>(b * invstd);
  coef[c] = static_cast<float>(gamma[c] * invstd);
  coef[channels + c] = static_cast<float>(a / count);
  coef[2 * channels + c] = static_cast<float>(invstd * invstd * b / count);
}

// max(v, 0) where a ReLU is fused after the batch norm.
template <bool Relu>
__device__ __forceinline__ float maybe_relu(float v) {
  if constexpr (Relu) return v > 0.f ? v : 0.f;
  return v;
}

// The residual added before the ReLU, where a join's add is fused in (null: none).
template <class T>
__device__ __forceinline__ float residual_at(const T* residual, int64_t i) {
  return residual ? to_f32(residual[i]) : 0.f;
}

template <class T, bool Relu>
__global__ void bn_apply(const T* x, const T* residual, T* y, const float* coef,
                         int64_t channels, int64_t inner, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (i / inner) % channels;
    y[i] = from_f32<T>(maybe_relu<Relu>(to_f32(x[i]) * coef[c] + coef[channels + c] + residual_at(residual, i)));
  }
}

// f += the residual's row r (its channels c0..), where there is one.
template <class T>
__device__ __forceinline__ void add_residual_vec(const T* residual, int64_t offset, float (&f)[kVec<T>]) {
  if (!residual) return;
  float z[kVec<T>];
  load_vec(residual + offset, z);
#pragma unroll
  for (int k = 0; k < kVec<T>; ++k) f[k] += z[k];
}

// bn_apply over a (rows, C) tensor in 16-byte vectors (RowTiling): each thread keeps its
// channels' coefficients in registers.
template <class T, bool Relu>
__global__ void bn_apply_rows_vec(const T* x, const T* residual, T* y, const float* __restrict__ coef,
                                  int64_t channels, int64_t rows, RowTiling tiling) {
  constexpr int V = kVec<T>;
  const int t = threadIdx.x;
  const int cv = static_cast<int>(blockIdx.x) * tiling.lanes + t % tiling.lanes;
  if (t >= tiling.lanes * tiling.row_threads || cv >= tiling.cvecs) return;
  const int64_t c0 = int64_t(cv) * V;
  float scale[V], shift[V];
  load_floats(coef + c0, scale);
  load_floats(coef + channels + c0, shift);
  // Unrolled so that several rows' loads are in flight per thread: these kernels wait on memory.
#pragma unroll 4
  for (int64_t r = int64_t(blockIdx.y) * tiling.row_threads + t / tiling.lanes; r < rows;
       r += int64_t(gridDim.y) * tiling.row_threads) {
    float f[V];
    load_vec(x + r * channels + c0, f);
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = f[k] * scale[k] + shift[k];
    add_residual_vec(residual, r * channels + c0, f);
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = maybe_relu<Relu>(f[k]);
    store_vec(y + r * channels + c0, f);
  }
}

template <class T, bool Relu>
__global__ void bn_eval_kernel(const T* x, const T* residual, T* y,
                               const float* gamma, const float* beta,
                               const float* mean, const float* var,
                               float eps, int64_t channels, int64_t inner, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (i / inner) % channels;
    const float invstd = 1.f / sqrtf(var[c] + eps);
    y[i] = from_f32<T>(
        maybe_relu<Relu>((to_f32(x[i]) - mean[c]) * invstd * gamma[c] + beta[c] + residual_at(residual, i)));
  }
}

// relu: null, or a fused ReLU's mask coefficients (channel_reduce.cuh's Stat).
template <class T>
__global__ void bn_backward_apply(const T* x, const T* dy,
                                  T* dx, const float* mean,
                                  const float* coef, const float* relu, int64_t channels, int64_t inner,
                                  int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (i / inner) % channels;
    const float k1 = coef[c], k2 = coef[channels + c], k3 = coef[2 * channels + c];
    const float xv = to_f32(x[i]);
    const float g = relu ? relu_masked(to_f32(dy[i]), xv, relu[c], relu[channels + c]) : to_f32(dy[i]);
    dx[i] = from_f32<T>(k1 * (g - k2 - (xv - mean[c]) * k3));
  }
}

// A fused ReLU's mask coefficients from the saved statistics: the forward's scale and shift,
// computed as bn_train_finalize computed them.
__global__ void bn_relu_coef(const float* __restrict__ gamma, const float* __restrict__ beta,
                             const float* __restrict__ saved_mean, const float* __restrict__ saved_invstd,
                             int64_t channels, float* __restrict__ relu) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= channels) return;
  const float scale = gamma[c] * saved_invstd[c];
  relu[c] = scale;
  relu[channels + c] = beta[c] - saved_mean[c] * scale;
}

// bn_eval_kernel over a (rows, C) tensor in 16-byte vectors (RowTiling): each thread folds its
// channels' statistics into a scale and shift once.
template <class T, bool Relu>
__global__ void bn_eval_rows_vec(const T* x, const T* residual, T* y, const float* __restrict__ gamma, const float* __restrict__ beta,
                                 const float* __restrict__ mean, const float* __restrict__ var, float eps,
                                 int64_t channels, int64_t rows, RowTiling tiling) {
  constexpr int V = kVec<T>;
  const int t = threadIdx.x;
  const int cv = static_cast<int>(blockIdx.x) * tiling.lanes + t % tiling.lanes;
  if (t >= tiling.lanes * tiling.row_threads || cv >= tiling.cvecs) return;
  const int64_t c0 = int64_t(cv) * V;
  float mu[V], scale[V], shift[V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    mu[k] = mean[c0 + k];
    scale[k] = 1.f / sqrtf(var[c0 + k] + eps) * gamma[c0 + k];
    shift[k] = beta[c0 + k];
  }
#pragma unroll 4
  for (int64_t r = int64_t(blockIdx.y) * tiling.row_threads + t / tiling.lanes; r < rows;
       r += int64_t(gridDim.y) * tiling.row_threads) {
    float f[V];
    load_vec(x + r * channels + c0, f);
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = (f[k] - mu[k]) * scale[k] + shift[k];
    add_residual_vec(residual, r * channels + c0, f);
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = maybe_relu<Relu>(f[k]);
    store_vec(y + r * channels + c0, f);
  }
}

// bn_backward_apply over a (rows, C) tensor in 16-byte vectors (RowTiling), with its formula
// refolded per channel as dx = a g + b x + c (fewer registers: 80 a thread had left three
// blocks per multiprocessor).
template <class T>
__global__ void __launch_bounds__(kThreads, 4)
bn_backward_apply_rows_vec(const T* x, const T* dy, T* dx, const float* __restrict__ mean,
                           const float* __restrict__ coef, const float* __restrict__ relu,
                           int64_t channels, int64_t rows, RowTiling tiling) {
  constexpr int V = kVec<T>;
  const int t = threadIdx.x;
  const int cv = static_cast<int>(blockIdx.x) * tiling.lanes + t % tiling.lanes;
  if (t >= tiling.lanes * tiling.row_threads || cv >= tiling.cvecs) return;
  const int64_t c0 = int64_t(cv) * V;
  float ka[V], kb[V], kc[V], rs[V] = {}, rt[V] = {};
  {
    float k2[V], k3[V], mu[V];
    load_floats(coef + c0, ka);
    load_floats(coef + channels + c0, k2);
    load_floats(coef + 2 * channels + c0, k3);
    load_floats(mean + c0, mu);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      kb[k] = -ka[k] * k3[k];
      kc[k] = ka[k] * (k3[k] * mu[k] - k2[k]);
    }
  }
  if (relu) {
    load_floats(relu + c0, rs);
    load_floats(relu + channels + c0, rt);
  }
#pragma unroll 2
  for (int64_t r = int64_t(blockIdx.y) * tiling.row_threads + t / tiling.lanes; r < rows;
       r += int64_t(gridDim.y) * tiling.row_threads) {
    float fx[V], g[V];
    load_vec(x + r * channels + c0, fx);
    load_vec(dy + r * channels + c0, g);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      if (relu) g[k] = relu_masked(g[k], fx[k], rs[k], rt[k]);
      g[k] = fmaf(ka[k], g[k], fmaf(kb[k], fx[k], kc[k]));
    }
    store_vec(dx + r * channels + c0, g);
  }
}

// ---- launchers ----------------------------------------------------------------------------

size_t batchnorm_scratch_bytes(int64_t outer, int64_t channels, int64_t inner) {
  return channel_reduce_scratch_bytes(outer, channels, inner);
}

namespace {

// The coefficients' area after the partials in scratch: 3 x C floats, then a fused ReLU's 2 x C.
float* coef_area(void* scratch, int64_t outer, int64_t channels, int64_t inner) {
  const int64_t s = reduce_splits(outer, channels, inner);
  return reinterpret_cast<float*>(static_cast<char*>(scratch) + s * channels * 2 * sizeof(double));
}

// Instantiates `launch` for a compile-time Relu.
template <class F>
void with_relu(bool relu, F&& launch) {
  if (relu) launch(std::true_type{});
  else launch(std::false_type{});
}

}  // namespace

void batchnorm_forward_train(Dt dt, const void* x, const float* gamma, const float* beta,
                             float momentum, float eps, float* running_mean, float* running_var,
                             void* y, float* saved_mean, float* saved_invstd, int64_t outer,
                             int64_t channels, int64_t inner, void* scratch, cudaStream_t stream,
                             bool relu, const void* residual) {
  const int64_t n = outer * channels * inner;
  if (n == 0) return;
  auto* part = static_cast<double*>(scratch);
  float* coef = coef_area(scratch, outer, channels, inner);
  dispatch_float(dt, "batchnorm_forward_train", [&](auto t) {
    using T = decltype(t);
    const int64_t splits = launch_partials<Stat::moments, T>(
        static_cast<const T*>(x), nullptr, nullptr, part, outer, channels, inner, stream);
    bn_train_finalize<<<channel_blocks(channels), finalize_block(), 0, stream>>>(
        part, splits, channels, static_cast<double>(outer * inner), gamma, beta, momentum, eps,
        running_mean, running_var, saved_mean, saved_invstd, coef);
    CONVOY_LAUNCH_CHECK(bn_train_finalize);
    with_relu(relu, [&](auto r) {
      constexpr bool R = decltype(r)::value;
      const auto* z = static_cast<const T*>(residual);
      if (rows_vectorizable<T>(inner, channels, {x, y, residual})) {
        const RowTiling tiling = row_tiling(channels, kVec<T>);
        const dim3 grid(tiling.blocks_x, row_blocks(tiling, outer));
        bn_apply_rows_vec<T, R><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(x), z, static_cast<T*>(y),
                                                                coef, channels, outer, tiling);
        CONVOY_LAUNCH_CHECK(bn_apply_rows_vec);
        return;
      }
      bn_apply<T, R><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(x), z, static_cast<T*>(y),
                                                           coef, channels, inner, n);
      CONVOY_LAUNCH_CHECK(bn_apply);
    });
  });
}

void batchnorm_forward_eval(Dt dt, const void* x, const float* gamma, const float* beta,
                            const float* running_mean, const float* running_var, float eps,
                            void* y, int64_t outer, int64_t channels, int64_t inner,
                            cudaStream_t stream, bool relu, const void* residual) {
  const int64_t n = outer * channels * inner;
  if (n == 0) return;
  dispatch_float(dt, "batchnorm_forward_eval", [&](auto t) {
    using T = decltype(t);
    with_relu(relu, [&](auto r) {
      constexpr bool R = decltype(r)::value;
      const auto* z = static_cast<const T*>(residual);
      if (rows_vectorizable<T>(inner, channels, {x, y, residual})) {
        const RowTiling tiling = row_tiling(channels, kVec<T>);
        const dim3 grid(tiling.blocks_x, row_blocks(tiling, outer));
        bn_eval_rows_vec<T, R><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(x), z, static_cast<T*>(y), gamma,
                                                               beta, running_mean, running_var, eps, channels, outer,
                                                               tiling);
        CONVOY_LAUNCH_CHECK(bn_eval_rows_vec);
        return;
      }
      bn_eval_kernel<T, R><<<grid_for(n), kThreads, 0, stream>>>(
          static_cast<const T*>(x), z, static_cast<T*>(y), gamma, beta, running_mean, running_var, eps,
          channels, inner, n);
      CONVOY_LAUNCH_CHECK(bn_eval_kernel);
    });
  });
}

void batchnorm_backward(Dt dt, const void* x, const void* dy, const float* gamma,
                        const float* saved_mean, const float* saved_invstd, void* dx,
                        float* dgamma, float* dbeta, int64_t outer, int64_t channels,
                        int64_t inner, void* scratch, cudaStream_t stream, const float* relu_beta) {
  const int64_t n = outer * channels * inner;
  if (n == 0) return;
  auto* part = static_cast<double*>(scratch);
  float* coef = coef_area(scratch, outer, channels, inner);
  float* relu = nullptr;
  if (relu_beta) {
    relu = coef + 3 * channels;
    bn_relu_coef<<<static_cast<unsigned>((channels + 255) / 256), 256, 0, stream>>>(
        gamma, relu_beta, saved_mean, saved_invstd, channels, relu);
    CONVOY_LAUNCH_CHECK(bn_relu_coef);
  }
  dispatch_float(dt, "batchnorm_backward", [&](auto t) {
    using T = decltype(t);
    const int64_t splits = launch_partials<Stat::backward, T>(
        static_cast<const T*>(x), static_cast<const T*>(dy), saved_mean, part, outer, channels,
        inner, stream, relu);
    bn_backward_finalize<<<channel_blocks(channels), finalize_block(), 0, stream>>>(
        part, splits, channels, static_cast<double>(outer * inner), gamma, saved_invstd, dgamma,
        dbeta, coef);
    CONVOY_LAUNCH_CHECK(bn_backward_finalize);
    if (dx && rows_vectorizable<T>(inner, channels, {x, dy, dx})) {
      const RowTiling tiling = row_tiling(channels, kVec<T>);
      const dim3 grid(tiling.blocks_x, row_blocks(tiling, outer));
      bn_backward_apply_rows_vec<T><<<grid, kThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), saved_mean, coef, relu,
          channels, outer, tiling);
      CONVOY_LAUNCH_CHECK(bn_backward_apply_rows_vec);
    } else if (dx) {
      bn_backward_apply<T><<<grid_for(n), kThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), saved_mean,
          coef, relu, channels, inner, n);
      CONVOY_LAUNCH_CHECK(bn_backward_apply);
    }
  });
}

}  // namespace convoy::kernels
