#pragma once
// The deterministic per-channel reduction under the batch-norm kernels (batchnorm.cu) and
// the bias gradient (bias.cu), over a tensor viewed as (outer, C, inner): nchw is
// (N, C, H*W), nhwc and (N, C) matrices are (N*H*W, C, 1). Each channel's elements are
// split over blocks whose partial sums go to scratch; a finalize kernel adds them in a fixed
// order, so results are the same run to run. Accumulation is in double (a thread adds short
// runs of rows in f32 before each double addition).
// Device code: only .cu files include this.
#include <algorithm>

#include "kernels/common.cuh"
#include "kernels/vec.cuh"

namespace convoy::kernels {

// What the partials hold per (split, channel): the sum of x; the sum of x and of x^2
// (batch statistics); or the sum of dy and of dy (x - mean) (batch-norm backward). With a
// fused ReLU (`relu` non-null: the forward's per-channel scale at [c], shift at [C + c]), the
// backward's dy is zero where x scale + shift <= 0, as the forward's ReLU was.
enum class Stat : int { sum = 0, moments = 1, backward = 2 };

// The current device's multiprocessors, asked once (a process drives one device).
inline int64_t multiprocessors() {
  static const int64_t count = [] {
    int device = 0, n = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || n <= 0)
      return int64_t{132};
    return int64_t{n};
  }();
  return count;
}

// Blocks of the (inner == 1) partials kernels side by side: 256 channels each (32 lanes of 8
// bf16; the f32 and scalar kernels cover fewer, so they run more blocks than planned here).
inline int64_t row_channel_tiles(int64_t channels) { return (channels + 255) / 256; }

// Blocks of channel_partials_rows_vec resident per multiprocessor (its launch bound: 64
// registers a thread, or 85 for the backward's two tensors and mask; 32 KiB of shared memory
// a block).
constexpr int kPartialsBlocksPerSM = 4;
constexpr int partials_blocks_per_sm(Stat s) { return s == Stat::backward ? 3 : kPartialsBlocksPerSM; }

// inner == 1: splits for one wave of `blocks_per_sm` blocks a multiprocessor, each split at
// least 64 rows.
inline int64_t row_splits(int64_t outer, int64_t channels, int blocks_per_sm) {
  const int64_t s = std::max<int64_t>(1, blocks_per_sm * multiprocessors() / row_channel_tiles(channels));
  return std::max<int64_t>(1, std::min<int64_t>({s, outer / 64, 1024}));
}

// How many splits of `outer` each channel's reduction uses. inner == 1: one wave of blocks
// over the chip, each split at least 64 rows: the H200 ran these kernels at a third of its
// bandwidth where 7x7 and 14x14 layers' few rows made 49-196 blocks, and where 1,024 splits
// of a 64-channel layer made 1.1 waves.
inline int64_t reduce_splits(int64_t outer, int64_t channels, int64_t inner) {
  const int64_t per_channel = outer * inner;
  int64_t s;
  if (inner == 1) {
    s = row_splits(outer, channels, kPartialsBlocksPerSM);
  } else {
    s = std::max<int64_t>(1, 1024 / std::max<int64_t>(1, channels));
    s = std::min<int64_t>(s, std::max<int64_t>(1, per_channel / 2048));
  }
  s = std::min<int64_t>(s, std::max<int64_t>(1, outer));
  return std::max<int64_t>(1, std::min<int64_t>(s, 1024));
}

// Scratch needed for a (outer, C, inner) tensor: the partials, then room for up to 5 floats
// of per-channel coefficients (the batch-norm kernels' coef_area: 3 of the backward, 2 of a
// fused ReLU's mask).
inline size_t channel_reduce_scratch_bytes(int64_t outer, int64_t channels, int64_t inner) {
  const int64_t s = reduce_splits(outer, channels, inner);
  return static_cast<size_t>(s * channels * 2) * sizeof(double) +
         static_cast<size_t>(5 * channels) * sizeof(float) + 256;
}

// The gradient through a fused ReLU: g where the forward's x scale + shift was positive. The
// same expression as the forward's, so the mask is the one the forward applied.
__device__ __forceinline__ float relu_masked(float g, float x, float scale, float shift) {
  return x * scale + shift > 0.f ? g : 0.f;
}

// ---- kernels ------------------------------------------------------------------------------

// One block per (channel, split) for inner > 1; threads walk the split's (outer, inner)
// elements, consecutive threads on consecutive inner positions.
template <Stat S, class T>
__global__ void channel_partials_strided(const T* __restrict__ x, const T* __restrict__ dy,
                                         const float* __restrict__ mean, const float* __restrict__ relu,
                                         double* __restrict__ part, int64_t outer, int64_t channels,
                                         int64_t inner, int64_t rows_per_split) {
  const int64_t c = blockIdx.x, s = blockIdx.y;
  const int64_t o0 = s * rows_per_split, o1 = min(outer, o0 + rows_per_split);
  const int64_t count = (o1 > o0 ? o1 - o0 : 0) * inner;
  const float mu = S == Stat::backward ? mean[c] : 0.f;
  const float rs = relu ? relu[c] : 0.f, rt = relu ? relu[channels + c] : 0.f;
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
      static_assert(S == Stat::backward);
      const float xv = to_f32(x[idx]);
      const double g = relu ? relu_masked(to_f32(dy[idx]), xv, rs, rt) : to_f32(dy[idx]);
      a += g;
      b += g * (xv - mu);
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
                                      const float* __restrict__ mean, const float* __restrict__ relu,
                                      double* __restrict__ part, int64_t outer, int64_t channels,
                                      int64_t rows_per_split) {
  __shared__ double sa[8][33], sb[8][33];
  const int64_t c = blockIdx.x * 32 + threadIdx.x, s = blockIdx.y;
  const int64_t o0 = s * rows_per_split, o1 = min(outer, o0 + rows_per_split);
  double a = 0, b = 0;
  if (c < channels) {
    const float mu = S == Stat::backward ? mean[c] : 0.f;
    const float rs = relu ? relu[c] : 0.f, rt = relu ? relu[channels + c] : 0.f;
    for (int64_t o = o0 + threadIdx.y; o < o1; o += 8) {
      const int64_t idx = o * channels + c;
      if constexpr (S == Stat::sum) {
        a += to_f32(x[idx]);
      } else if constexpr (S == Stat::moments) {
        const double v = to_f32(x[idx]);
        a += v;
        b += v * v;
      } else {
        static_assert(S == Stat::backward);
        const float xv = to_f32(x[idx]);
        const double g = relu ? relu_masked(to_f32(dy[idx]), xv, rs, rt) : to_f32(dy[idx]);
        a += g;
        b += g * (xv - mu);
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

// inner == 1, C a multiple of the vector width, aligned: each thread reads 16-byte vectors of
// its channels (RowTiling), rows row_threads apart. A thread adds a run of rows in f32 (a few
// roundings of a short sum), then adds the run's sum to its own double slot in shared memory:
// double accumulators in registers had cost these kernels most of their occupancy (78 and 112
// registers a thread, 2-3 blocks per multiprocessor). The block's slots are then added in a
// fixed order, so results are the same run to run.
template <Stat S, class T>
__global__ void __launch_bounds__(kThreads, partials_blocks_per_sm(S))
channel_partials_rows_vec(const T* __restrict__ x, const T* __restrict__ dy, const float* __restrict__ mean,
                          const float* __restrict__ relu, double* __restrict__ part, int64_t outer,
                          int64_t channels, int64_t rows_per_split, RowTiling tiling) {
  constexpr int V = kVec<T>;
  constexpr int kStats = S == Stat::sum ? 1 : 2;
  // [stat][k][thread]: a warp's threads touch consecutive doubles (no bank conflicts).
  __shared__ double slots[kStats][V][kThreads];
  const int t = threadIdx.x;
  const int cv = static_cast<int>(blockIdx.x) * tiling.lanes + t % tiling.lanes;
  const bool active = t < tiling.lanes * tiling.row_threads && cv < tiling.cvecs;
  const int64_t s = blockIdx.y;
  const int64_t o0 = s * rows_per_split, o1 = min(outer, o0 + rows_per_split);
  const int64_t c0 = int64_t(cv) * V;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    slots[0][k][t] = 0;
    if constexpr (kStats == 2) slots[1][k][t] = 0;
  }
  if (active) {
    float mu[V] = {}, rs[V] = {}, rt[V] = {};
    if constexpr (S == Stat::backward) {
      load_floats(mean + c0, mu);
      if (relu) {
        load_floats(relu + c0, rs);
        load_floats(relu + channels + c0, rt);
      }
    }
    // Runs of kRun rows in f32, loaded kGroup at a time (in flight at once).
    constexpr int kGroup = 4, kRun = 32;
    const int64_t step = tiling.row_threads;
#pragma unroll 1
    for (int64_t run = o0 + t / tiling.lanes; run < o1; run += kRun * step) {
      const int64_t run_end = min(o1, run + kRun * step);
      float fa[V], fb[V];
#pragma unroll
      for (int k = 0; k < V; ++k) fa[k] = fb[k] = 0.f;
#pragma unroll 1
      for (int64_t o = run; o < run_end; o += kGroup * step) {
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {
          const int64_t row = o + u * step;
          if (row >= run_end) break;
          float v[V];
          load_vec(x + row * channels + c0, v);
          if constexpr (S == Stat::sum) {
#pragma unroll
            for (int k = 0; k < V; ++k) fa[k] += v[k];
          } else if constexpr (S == Stat::moments) {
#pragma unroll
            for (int k = 0; k < V; ++k) {
              fa[k] += v[k];
              fb[k] = fmaf(v[k], v[k], fb[k]);
            }
          } else {
            static_assert(S == Stat::backward);
            float g[V];
            load_vec(dy + row * channels + c0, g);
#pragma unroll
            for (int k = 0; k < V; ++k) {
              if (relu) g[k] = relu_masked(g[k], v[k], rs[k], rt[k]);
              fa[k] += g[k];
              fb[k] = fmaf(g[k], v[k] - mu[k], fb[k]);
            }
          }
        }
      }
#pragma unroll
      for (int k = 0; k < V; ++k) {
        slots[0][k][t] += fa[k];
        if constexpr (kStats == 2) slots[1][k][t] += fb[k];
      }
    }
  }
  __syncthreads();
  if (active && t < tiling.lanes) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      double a = slots[0][k][t], b = kStats == 2 ? slots[kStats - 1][k][t] : 0.0;
      for (int r = 1; r < tiling.row_threads; ++r) {
        a += slots[0][k][r * tiling.lanes + t];
        if constexpr (kStats == 2) b += slots[kStats - 1][k][r * tiling.lanes + t];
      }
      part[(s * channels + c0 + k) * 2] = a;
      part[(s * channels + c0 + k) * 2 + 1] = b;
    }
  }
}

// ---- launch helpers -----------------------------------------------------------------------

// Launches the partials of statistic S; returns the number of splits. `relu`: see Stat.
template <Stat S, class T>
int64_t launch_partials(const T* x, const T* dy, const float* mean, double* part, int64_t outer,
                        int64_t channels, int64_t inner, cudaStream_t stream,
                        const float* relu = nullptr) {
  const bool vec = rows_vectorizable<T>(inner, channels, {x, dy});
  // The vector kernel's wave (no more splits than reduce_splits, which sizes the scratch).
  const int64_t splits = vec ? row_splits(outer, channels, partials_blocks_per_sm(S))
                             : reduce_splits(outer, channels, inner);
  const int64_t rows = (outer + splits - 1) / splits;
  if (vec) {
    const RowTiling tiling = row_tiling(channels, kVec<T>, /*max_lanes=*/32);
    dim3 grid(tiling.blocks_x, static_cast<unsigned>(splits));
    channel_partials_rows_vec<S, T><<<grid, kThreads, 0, stream>>>(x, dy, mean, relu, part, outer,
                                                                    channels, rows, tiling);
    CONVOY_LAUNCH_CHECK(channel_partials_rows_vec);
  } else if (inner == 1) {
    dim3 grid(static_cast<unsigned>((channels + 31) / 32), static_cast<unsigned>(splits));
    channel_partials_rows<S, T><<<grid, dim3(32, 8), 0, stream>>>(x, dy, mean, relu, part, outer,
                                                                   channels, rows);
    CONVOY_LAUNCH_CHECK(channel_partials_rows);
  } else {
    dim3 grid(static_cast<unsigned>(channels), static_cast<unsigned>(splits));
    channel_partials_strided<S, T><<<grid, kThreads, 0, stream>>>(x, dy, mean, relu, part, outer,
                                                                   channels, inner, rows);
    CONVOY_LAUNCH_CHECK(channel_partials_strided);
  }
  return splits;
}

// The finalize kernels: blocks of 32 channels x 32 rows of threads (kFinalizeBlock), each row
// adding every 32nd split, so a thousand splits cost each thread ~32 loads, not a thousand.
inline unsigned channel_blocks(int64_t channels) { return static_cast<unsigned>((channels + 31) / 32); }
inline dim3 finalize_block() { return dim3(32, 32); }

// In a finalize kernel (channel_blocks x finalize_block): the sums over all splits of channel
// blockIdx.x * 32 + threadIdx.x's two partials, added in a fixed order (deterministic). True
// in the one thread per channel that goes on to finalize it (threadIdx.y == 0).
__device__ __forceinline__ bool sum_splits(const double* __restrict__ part, int64_t splits, int64_t channels,
                                           double& a, double& b) {
  __shared__ double sa[32][33], sb[32][33];
  const int64_t c = blockIdx.x * 32 + threadIdx.x;
  double x = 0, y = 0;
  if (c < channels)
    for (int64_t s = threadIdx.y; s < splits; s += 32) {
      x += part[(s * channels + c) * 2];
      y += part[(s * channels + c) * 2 + 1];
    }
  sa[threadIdx.y][threadIdx.x] = x;
  sb[threadIdx.y][threadIdx.x] = y;
  __syncthreads();
  if (threadIdx.y != 0 || c >= channels) return false;
  a = b = 0;
  for (int r = 0; r < 32; ++r) {
    a += sa[r][threadIdx.x];
    b += sb[r][threadIdx.x];
  }
  return true;
}

}  // namespace convoy::kernels
