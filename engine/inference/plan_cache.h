#pragma once
// InferencePlans: the plans of one model by batch size, built on first use, for callers that
// see a few batch sizes (an evaluation's full batches and its last, smaller one).
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "engine/inference/inference_plan.h"

namespace convoy {

class InferencePlans {
 public:
  explicit InferencePlans(const InferenceOptions& options = {}) : options_(options) {}

  // Logits (N, classes) of x (N, C, H, W) f32 nchw on the CPU through the plan for N, or
  // nullptr when `model` cannot be planned (the caller runs Model::forward instead; why() says
  // why). The tensor is the plan's and is overwritten by its next run.
  const Tensor* run(Model& model, const Tensor& x);
  const std::string& why() const { return why_; }

 private:
  static constexpr size_t kMaxPlans = 4;  // beyond this many batch sizes, start over
  InferenceOptions options_;
  Model* model_ = nullptr;
  bool unsupported_ = false;
  std::string why_;
  std::map<int64_t, std::unique_ptr<InferencePlan>> plans_;
};

}  // namespace convoy
