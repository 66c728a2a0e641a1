#pragma once
// Data-parallel gradient averaging as PyTorch's DDP does it: the f32 gradients live in a few
// flat buckets (~25 MB, in reverse layer order, the order backward produces them), and a
// bucket's all-reduce starts as soon as backward has written all its gradients, so the
// communication overlaps the rest of the backward pass.
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/distributed/communicator.h"
#include "engine/layers/layer.h"

namespace convoy {

inline constexpr int64_t kDefaultBucketBytes = int64_t{25} << 20;  // DDP's bucket_cap_mb
inline constexpr int64_t kBucketAlignElements = 64;                 // 256 bytes: each gradient's start

struct GradBucket {
  std::vector<size_t> members;  // indices into the planned list, in that order
  int64_t offset = 0;           // elements, in the flat gradient buffer
  int64_t elements = 0;         // the bucket's span, padding included
};

// Buckets over gradients of `sizes` elements (f32), taken in the order given: a bucket is
// closed once it holds `cap_bytes` or more (so one larger than the cap sits alone), and each
// gradient starts at a multiple of `align` elements. The buckets tile [0, total) in order.
std::vector<GradBucket> plan_buckets(const std::vector<int64_t>& sizes, int64_t cap_bytes, int64_t align);

class GradientReducer {
 public:
  // `params` in the model's order (Model::parameters()); their gradients are reduced in the
  // reverse order. Each parameter's `grad` becomes a view into the flat buffer (zeroed).
  GradientReducer(Communicator& comm, Backend& backend, const std::vector<Parameter*>& params,
                  int64_t bucket_bytes = kDefaultBucketBytes);

  // Model::backward's hook: these gradients are final; launches the buckets they complete.
  void grads_ready(std::span<Parameter* const> params);
  // After backward: launches the buckets not launched yet (gradients backward never reached,
  // which stay as they were), and makes the backend's later work wait for all of them.
  void finish();

  const std::vector<GradBucket>& buckets() const { return buckets_; }
  // Buckets the last step launched during backward, before finish() (the overlap).
  size_t launched_during_backward() const { return launched_early_; }

 private:
  void launch_ready();

  Communicator& comm_;
  std::vector<Parameter*> order_;  // reverse model order
  std::vector<GradBucket> buckets_;
  std::unordered_map<const Parameter*, size_t> index_;  // into order_
  std::vector<size_t> bucket_of_;                       // by index into order_
  std::vector<size_t> missing_;                         // per bucket, gradients not ready yet
  std::vector<bool> seen_;                              // by index into order_, this step
  size_t next_launch_ = 0;
  size_t launched_early_ = 0;
  Tensor flat_;  // (total) f32: every gradient, bucket after bucket
  std::vector<Tensor> bucket_views_;  // (elements) f32 each, into flat_
};

}  // namespace convoy
