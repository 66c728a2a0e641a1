// Fused optimizer updates: one launch updates every parameter. Each block owns a chunk of
// kOptimChunk elements of one slot; it finds its slot by binary search over the blocks'
// prefix sums (`block_start`).
#include <cmath>

#include "kernels/common.cuh"
#include "kernels/optimizer_update.cuh"

namespace convoy::kernels {

// ---- kernels ------------------------------------------------------------------------------

__device__ __forceinline__ int find_slot(const int64_t* block_start, int num_slots, int64_t block) {
  int lo = 0, hi = num_slots - 1;  // the last slot whose first block <= block
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (block_start[mid] <= block) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// A thread's share of the gradient statistics: non-finite elements, squares of the others.
struct GradTally {
  float bad = 0.f, sumsq = 0.f;
  __device__ __forceinline__ void add(float g) {
    if (isfinite(g)) sumsq = fmaf(g, g, sumsq);
    else bad += 1.f;
  }
  // The block's sums into stats[0..1] (every thread of the block calls it, or none does).
  __device__ __forceinline__ void flush(float* stats) {
    const float b = block_sum(bad), q = block_sum(sumsq);
    if (threadIdx.x == 0) {
      if (b != 0.f) atomicAdd(stats, b);
      atomicAdd(stats + 1, q);
    }
  }
};

__global__ void sgd_kernel(const SgdSlotDev* __restrict__ slots,
                           const int64_t* __restrict__ block_start, int num_slots, float lr,
                           float momentum, bool nesterov, float* stats, bool apply) {
  const int k = find_slot(block_start, num_slots, blockIdx.x);
  const SgdSlotDev s = slots[k];
  const int64_t begin = (blockIdx.x - block_start[k]) * kOptimChunk;
  const int64_t end = min(begin + kOptimChunk, s.n);
  GradTally tally;
  // Explicit _rn operations: no FMA contraction, so the arithmetic is the formula's, step
  // by step, as on the CPU.
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    if (stats) tally.add(s.grad[i]);
    if (!apply) continue;
    float g = __fadd_rn(s.grad[i], __fmul_rn(s.weight_decay, s.param[i]));
    if (s.buf) {  // as the CPU: a given buffer is kept current even at momentum 0
      const float b = __fadd_rn(__fmul_rn(momentum, s.buf[i]), g);
      s.buf[i] = b;
      g = nesterov ? __fadd_rn(g, __fmul_rn(momentum, b)) : b;
    }
    s.param[i] = __fsub_rn(s.param[i], __fmul_rn(lr, g));
  }
  if (stats) tally.flush(stats);
}

// param = param * (1 - lr wd) - step_size m / (sqrt(v) inv_sqrt_bc2 + eps), with
// step_size = lr / (1 - beta1^step) and inv_sqrt_bc2 = 1 / sqrt(1 - beta2^step): the
// ops.h formula, arranged as the CPU backend computes it.
__global__ void adamw_kernel(const AdamSlotDev* __restrict__ slots,
                             const int64_t* __restrict__ block_start, int num_slots, float lr,
                             float beta1, float beta2, float eps, float step_size,
                             float inv_sqrt_bc2, float* stats, bool apply) {
  const int k = find_slot(block_start, num_slots, blockIdx.x);
  const AdamSlotDev s = slots[k];
  const int64_t begin = (blockIdx.x - block_start[k]) * kOptimChunk;
  const int64_t end = min(begin + kOptimChunk, s.n);
  const float decay = __fsub_rn(1.f, __fmul_rn(lr, s.weight_decay));
  const float one_minus_b1 = __fsub_rn(1.f, beta1), one_minus_b2 = __fsub_rn(1.f, beta2);
  GradTally tally;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const float g = s.grad[i];
    if (stats) tally.add(g);
    if (!apply) continue;
    const float m = __fadd_rn(__fmul_rn(beta1, s.m[i]), __fmul_rn(one_minus_b1, g));
    const float v = __fadd_rn(__fmul_rn(beta2, s.v[i]), __fmul_rn(__fmul_rn(one_minus_b2, g), g));
    s.m[i] = m;
    s.v[i] = v;
    const float denom = __fadd_rn(__fmul_rn(__fsqrt_rn(v), inv_sqrt_bc2), eps);
    s.param[i] = __fsub_rn(__fmul_rn(s.param[i], decay), __fdiv_rn(__fmul_rn(step_size, m), denom));
  }
  if (stats) tally.flush(stats);
}

// ---- launchers ----------------------------------------------------------------------------

void sgd_update(const SgdSlotDev* slots, const int64_t* block_start, int num_slots,
                int64_t num_blocks, float lr, float momentum, bool nesterov, float* stats, bool apply,
                cudaStream_t stream) {
  if (num_slots == 0 || num_blocks == 0) return;
  if (num_blocks > 0x7fffffff) throw InternalError("sgd_update: too many parameters");
  sgd_kernel<<<static_cast<unsigned>(num_blocks), kThreads, 0, stream>>>(
      slots, block_start, num_slots, lr, momentum, nesterov, stats, apply);
  CONVOY_LAUNCH_CHECK(sgd_kernel);
}

void adamw_update(const AdamSlotDev* slots, const int64_t* block_start, int num_slots,
                  int64_t num_blocks, float lr, float beta1, float beta2, float eps,
                  float step_size, float inv_sqrt_bc2, float* stats, bool apply,
                  cudaStream_t stream) {
  if (num_slots == 0 || num_blocks == 0) return;
  if (num_blocks > 0x7fffffff) throw InternalError("adamw_update: too many parameters");
  adamw_kernel<<<static_cast<unsigned>(num_blocks), kThreads, 0, stream>>>(
      slots, block_start, num_slots, lr, beta1, beta2, eps, step_size, inv_sqrt_bc2, stats, apply);
  CONVOY_LAUNCH_CHECK(adamw_kernel);
}

}  // namespace convoy::kernels
