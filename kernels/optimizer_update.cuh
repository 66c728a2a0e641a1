#pragma once
// Host-side launchers of optimizer_update.cu (no device code here; the backend includes it):
// the fused SGD and AdamW updates, one launch over every parameter. Each queues its work on
// `stream`, checks the launch, and returns without synchronizing.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace convoy::kernels {

// One parameter as the kernels read it from device memory (f32 throughout).
struct SgdSlotDev {
  float* param;
  const float* grad;
  float* buf;  // null: no momentum buffer (momentum 0)
  float weight_decay;
  int64_t n;
};
struct AdamSlotDev {
  float* param;
  const float* grad;
  float* m;
  float* v;
  float weight_decay;
  int64_t n;
};
// Elements per block of the fused updates; the host builds `block_start` (slots + 1
// entries: the first block of each slot, then the total) with this chunk size.
constexpr int64_t kOptimChunk = 8192;
// `stats` (null: none): two device floats the update adds to, the number of non-finite
// gradient elements and the sum of squares of the finite ones. `apply` false: only those,
// no parameter or state written.
void sgd_update(const SgdSlotDev* slots, const int64_t* block_start, int num_slots,
                int64_t num_blocks, float lr, float momentum, bool nesterov, float* stats,
                bool apply, cudaStream_t stream);
// step_size = lr / (1 - beta1^step), inv_sqrt_bc2 = 1 / sqrt(1 - beta2^step), both
// computed on the host in double.
void adamw_update(const AdamSlotDev* slots, const int64_t* block_start, int num_slots,
                  int64_t num_blocks, float lr, float beta1, float beta2, float eps,
                  float step_size, float inv_sqrt_bc2, float* stats, bool apply,
                  cudaStream_t stream);

}  // namespace convoy::kernels
