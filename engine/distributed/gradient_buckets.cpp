#include "engine/distributed/gradient_buckets.h"

#include "engine/core/error.h"

namespace convoy {

std::vector<GradBucket> plan_buckets(const std::vector<int64_t>& sizes, int64_t cap_bytes, int64_t align) {
  CONVOY_CHECK(cap_bytes > 0 && align > 0, "bucket cap and alignment must be positive");
  std::vector<GradBucket> buckets;
  int64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (buckets.empty() || buckets.back().elements * 4 >= cap_bytes) {
      buckets.push_back({{}, offset, 0});
    }
    GradBucket& b = buckets.back();
    const int64_t padded = (sizes[i] + align - 1) / align * align;
    b.members.push_back(i);
    b.elements += padded;
    offset += padded;
  }
  return buckets;
}

GradientReducer::GradientReducer(Communicator& comm, Backend& backend, const std::vector<Parameter*>& params,
                                 int64_t bucket_bytes)
    : comm_(comm), order_(params.rbegin(), params.rend()) {
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < order_.size(); ++i) {
    sizes.push_back(order_[i]->value.numel());
    index_[order_[i]] = i;
  }
  buckets_ = plan_buckets(sizes, bucket_bytes, kBucketAlignElements);
  int64_t total = 0;
  for (const GradBucket& b : buckets_) total += b.elements;
  flat_ = backend.zeros({std::max<int64_t>(total, 1)}, DType::f32);
  bucket_of_.resize(order_.size());
  std::vector<int64_t> start(order_.size());
  for (size_t k = 0; k < buckets_.size(); ++k) {
    int64_t at = buckets_[k].offset;
    for (size_t m : buckets_[k].members) {
      bucket_of_[m] = k;
      start[m] = at;
      at += (sizes[m] + kBucketAlignElements - 1) / kBucketAlignElements * kBucketAlignElements;
    }
    bucket_views_.push_back(flat_.slice_rows(buckets_[k].offset, buckets_[k].offset + buckets_[k].elements));
  }
  // The gradients move into the buckets: layers write them there, the optimizer reads them there.
  for (size_t i = 0; i < order_.size(); ++i) {
    Parameter* p = order_[i];
    CONVOY_CHECK(p->grad.dtype() == DType::f32 && p->grad.shape() == p->value.shape(), "f32 gradients");
    p->grad = flat_.slice_rows(start[i], start[i] + sizes[i]).reshape(p->value.shape());
  }
  missing_.assign(buckets_.size(), 0);
  seen_.assign(order_.size(), false);
  for (size_t k = 0; k < buckets_.size(); ++k) missing_[k] = buckets_[k].members.size();
}

void GradientReducer::grads_ready(std::span<Parameter* const> params) {
  for (Parameter* p : params) {
    auto it = index_.find(p);
    CONVOY_CHECK(it != index_.end(), "a gradient the reducer does not hold");
    if (seen_[it->second]) continue;
    seen_[it->second] = true;
    --missing_[bucket_of_[it->second]];
  }
  launch_ready();
}

// In bucket order only: every rank must issue the same collectives in the same order.
void GradientReducer::launch_ready() {
  while (next_launch_ < buckets_.size() && missing_[next_launch_] == 0) {
    Tensor view[] = {bucket_views_[next_launch_]};
    comm_.all_reduce(view, ReduceOp::avg);
    ++next_launch_;
  }
}

void GradientReducer::finish() {
  launched_early_ = next_launch_;
  for (size_t k = next_launch_; k < buckets_.size(); ++k) missing_[k] = 0;
  launch_ready();
  comm_.wait();
  // The next step starts over.
  next_launch_ = 0;
  seen_.assign(order_.size(), false);
  for (size_t k = 0; k < buckets_.size(); ++k) missing_[k] = buckets_[k].members.size();
}

}  // namespace convoy
