#include "engine/inference/batched_plans.h"

#include <algorithm>
#include <cstring>

#include "engine/core/error.h"
#include "engine/inference/plan_internal.h"

namespace convoy {

std::vector<int64_t> BatchedPlans::planned_sizes(int64_t max_batch) {
  if (max_batch < 1) throw InputError("batched inference plans: max batch must be positive, got " +
                                      std::to_string(max_batch));
  std::vector<int64_t> sizes;
  for (int64_t s = 1; s < max_batch; s *= 2) sizes.push_back(s);
  sizes.push_back(max_batch);
  return sizes;
}

std::vector<int64_t> BatchedPlans::passes(int64_t n, const std::vector<int64_t>& sizes) {
  std::vector<int64_t> out;
  for (int64_t left = n; left > 0;) {
    const auto up = std::lower_bound(sizes.begin(), sizes.end(), left);
    if (up != sizes.end() && (*up - left) * 4 <= *up) {
      out.push_back(*up);
      break;
    }
    const int64_t fits = *std::prev(std::upper_bound(sizes.begin(), sizes.end(), left));
    out.push_back(fits);
    left -= fits;
  }
  return out;
}

BatchedPlans::BatchedPlans(Model& model, int64_t max_batch, InferenceOptions options)
    : model_(model), sharing_(std::make_shared<plan::PlanSharing>()), sizes_(planned_sizes(max_batch)) {
  options.sharing = sharing_;
  // The largest first: its arena serves the smaller plans.
  plans_.resize(sizes_.size());
  padded_.resize(sizes_.size());
  for (size_t i = sizes_.size(); i-- > 0;) plans_[i] = std::make_unique<InferencePlan>(model, sizes_[i], options);
}

BatchedPlans::~BatchedPlans() = default;

size_t BatchedPlans::bytes() const { return sharing_->bytes(); }

Tensor BatchedPlans::run(const Tensor& x) {
  const int64_t n = x.ndim() == 4 ? x.dim(0) : 0;
  if (n < 1 || n > sizes_.back() || x.dtype() != DType::f32 || !x.device().is_cpu() ||
      x.layout() != Layout::nchw)
    throw InputError("model '" + model_.name() + "': inference plans of up to " + std::to_string(sizes_.back()) +
                     " take f32 nchw (N, C, H, W) on the CPU, got " + shape_str(x.shape()));
  const size_t row_bytes = x.nbytes() / static_cast<size_t>(n);
  Tensor logits;
  int64_t done = 0;
  for (int64_t size : passes(n, sizes_)) {
    const size_t i = static_cast<size_t>(std::find(sizes_.begin(), sizes_.end(), size) - sizes_.begin());
    const int64_t rows = std::min(size, n - done);
    const Tensor* out = nullptr;
    if (rows == size) {
      out = &plans_[i]->run(x.slice_rows(done, done + rows));
    } else {
      Tensor& in = padded_[i];
      if (!in.defined()) in = Tensor::zeros({size, x.dim(1), x.dim(2), x.dim(3)});
      std::memcpy(in.raw(), static_cast<const char*>(x.raw()) + static_cast<size_t>(done) * row_bytes,
                  static_cast<size_t>(rows) * row_bytes);
      std::memset(static_cast<char*>(in.raw()) + static_cast<size_t>(rows) * row_bytes, 0,
                  static_cast<size_t>(size - rows) * row_bytes);
      out = &plans_[i]->run(in);
    }
    if (!logits.defined()) logits = Tensor::empty({n, out->dim(1)});
    const size_t out_row = out->nbytes() / static_cast<size_t>(size);
    std::memcpy(static_cast<char*>(logits.raw()) + static_cast<size_t>(done) * out_row, out->raw(),
                static_cast<size_t>(rows) * out_row);
    done += rows;
  }
  return logits;
}

}  // namespace convoy
