#pragma once
// 16-byte vector loads and stores for the memory-bound kernels (8 bf16/f16 or 4 f32 per
// access): scalar 2-byte accesses reach a fraction of the H200's bandwidth, 16-byte ones
// nearly all of it. The tiling over (rows, channel vectors) keeps each thread on the same
// channels, so per-channel coefficients are read once into registers. Device code: only .cu
// files include this.
#include <cstdint>
#include <initializer_list>

#include "kernels/common.cuh"

namespace convoy::kernels {

template <class T>
constexpr int kVec = 16 / static_cast<int>(sizeof(T));

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Whether n elements at these pointers can go through the 16-byte path.
template <class T>
bool vectorizable(int64_t n, std::initializer_list<const void*> pointers) {
  if (n % kVec<T> != 0) return false;
  for (const void* p : pointers)
    if (p && !aligned16(p)) return false;
  return true;
}

template <class T>
__device__ __forceinline__ void load_vec(const T* p, float (&f)[kVec<T>]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int k = 0; k < kVec<T>; ++k) f[k] = to_f32(e[k]);
}

template <class T>
__device__ __forceinline__ void store_vec(T* p, const float (&f)[kVec<T>]) {
  uint4 raw;
  T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
  for (int k = 0; k < kVec<T>; ++k) e[k] = from_f32<T>(f[k]);
  *reinterpret_cast<uint4*>(p) = raw;
}

// A (rows, C) row-major tensor (nhwc as (N*H*W, C), or a matrix) with C a multiple of the
// vector width, tiled for blocks of kThreads threads: `lanes` channel vectors side by side
// (consecutive threads, coalesced), `row_threads` rows per pass of a block.
struct RowTiling {
  int cvecs;        // channel vectors per row
  int lanes;        // channel vectors per block
  int row_threads;  // rows a block covers per pass
  unsigned blocks_x;
};

// max_lanes < kThreads puts more of a block's threads on rows (the reductions: more blocks
// side by side over wide layers).
inline RowTiling row_tiling(int64_t channels, int vec, int max_lanes = kThreads) {
  RowTiling t;
  t.cvecs = static_cast<int>(channels / vec);
  t.lanes = t.cvecs < max_lanes ? t.cvecs : max_lanes;
  t.row_threads = kThreads / t.lanes;
  t.blocks_x = static_cast<unsigned>((t.cvecs + t.lanes - 1) / t.lanes);
  return t;
}

// Row blocks for a pass over `rows` rows: each thread at least kRowsPerThread rows (its
// channels' coefficients, loaded once, are as many bytes as a few rows: one row per thread had
// run a 7x7 layer's backward at a fifth of the bandwidth), at most 4,096 blocks in all.
inline unsigned row_blocks(const RowTiling& t, int64_t rows) {
  constexpr int64_t kRowsPerThread = 4;
  int64_t want = (rows + t.row_threads * kRowsPerThread - 1) / (t.row_threads * kRowsPerThread);
  const int64_t cap = 4096 / static_cast<int64_t>(t.blocks_x) > 0 ? 4096 / static_cast<int64_t>(t.blocks_x) : 1;
  if (want > cap) want = cap;
  if (want < 1) want = 1;
  return static_cast<unsigned>(want);
}

// f = p[0..V), in 16-byte loads where p is aligned (per-channel coefficients).
template <int V>
__device__ __forceinline__ void load_floats(const float* __restrict__ p, float (&f)[V]) {
  if constexpr (V % 4 == 0) {
    if ((reinterpret_cast<uintptr_t>(p) & 15u) == 0) {
#pragma unroll
      for (int k = 0; k < V; k += 4) {
        const float4 q = __ldg(reinterpret_cast<const float4*>(p + k));
        f[k] = q.x;
        f[k + 1] = q.y;
        f[k + 2] = q.z;
        f[k + 3] = q.w;
      }
      return;
    }
  }
#pragma unroll
  for (int k = 0; k < V; ++k) f[k] = __ldg(p + k);
}

// Whether a (rows, C) tensor of T at these pointers can take the tiled 16-byte path.
template <class T>
bool rows_vectorizable(int64_t inner, int64_t channels, std::initializer_list<const void*> pointers) {
  return inner == 1 && channels % kVec<T> == 0 && channels / kVec<T> <= (int64_t{1} << 30) &&
         vectorizable<T>(channels, pointers);
}

}  // namespace convoy::kernels
