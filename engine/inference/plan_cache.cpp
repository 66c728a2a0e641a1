#include "engine/inference/plan_cache.h"

#include "engine/core/error.h"

namespace convoy {

const Tensor* InferencePlans::run(Model& model, const Tensor& x) {
  if (model_ != &model) {
    plans_.clear();
    model_ = &model;
    why_ = InferencePlan::unsupported_reason(model);
    unsupported_ = !why_.empty();
  }
  // Reduced precision was asked for: never fall back to the fp32 layers without saying so.
  if (options_.precision != Precision::fp32 && (unsupported_ || x.ndim() != 4))
    throw InputError(std::string(to_string(options_.precision)) + " inference of model '" + model.name() +
                     "': " + (unsupported_ ? why_ : "the input is not (N, C, H, W)"));
  if (unsupported_ || x.ndim() != 4) return nullptr;
  auto it = plans_.find(x.dim(0));
  if (it == plans_.end()) {
    if (plans_.size() >= kMaxPlans) plans_.clear();
    it = plans_.emplace(x.dim(0), std::make_unique<InferencePlan>(model, x.dim(0), options_)).first;
  }
  return &it->second->run(x);
}

}  // namespace convoy
