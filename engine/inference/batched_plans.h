#pragma once
// BatchedPlans: inference plans for every batch a server instance forms, up to its
// max_batch_size, from plans at a few sizes (1, 2, 4, ... and max_batch itself) built up front.
// They run one at a time, so they share one arena, and one copy of each reordered weight where
// their primitives want the same layout. A batch of another size runs as passes of planned
// sizes, the last one padded where that wastes little. Not for concurrent use.
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/graph/model.h"
#include "engine/inference/inference_plan.h"

namespace convoy {

class BatchedPlans {
 public:
  // Builds the plans of `model` (which InferencePlan::unsupported_reason must accept) for
  // batches of 1 to max_batch. `options.sharing` is set here.
  BatchedPlans(Model& model, int64_t max_batch, InferenceOptions options = {});
  ~BatchedPlans();
  BatchedPlans(const BatchedPlans&) = delete;
  BatchedPlans& operator=(const BatchedPlans&) = delete;

  // Logits (n, classes) of x (n, C, H, W) f32 nchw on the CPU, 1 <= n <= max_batch.
  Tensor run(const Tensor& x);

  const std::vector<int64_t>& sizes() const { return sizes_; }
  // Bytes the plans hold: their arena, and their weights (a shared copy once).
  size_t bytes() const;

  // 1, 2, 4, ... below max_batch, and max_batch.
  static std::vector<int64_t> planned_sizes(int64_t max_batch);
  // The planned sizes a batch of n runs as, in order: while rows are left, the smallest planned
  // size that holds them all if its padding is at most a quarter of it, else the largest size
  // that they fill.
  static std::vector<int64_t> passes(int64_t n, const std::vector<int64_t>& sizes);

 private:
  Model& model_;
  std::shared_ptr<plan::PlanSharing> sharing_;
  std::vector<int64_t> sizes_;
  std::vector<std::unique_ptr<InferencePlan>> plans_;  // by sizes_
  std::vector<Tensor> padded_;                         // by sizes_: the input of a padded pass
};

}  // namespace convoy
