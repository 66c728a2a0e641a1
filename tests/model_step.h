#pragma once
// One training step of a model on a fixed random batch, for tests that compare two ways of
// computing the same step (layouts, fused and unfused layers, GPU against CPU).
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/graph/model.h"

namespace convoy::testing {

struct ModelStep {
  std::vector<float> logits;
  std::vector<std::pair<std::string, std::vector<float>>> grads;  // f32 master gradients
  std::vector<float> eval_logits;  // a forward in evaluation mode after the step
};

// Model (seed 7) from models/<model_file>, moved to `be` in dtype and layout, with or without
// ReLU fusion; one training forward + backward on a batch of `n` normal values (seed 5).
inline ModelStep model_step(Backend& be, const std::string& model_file, DType dtype, Layout layout,
                            bool fusion = true, int64_t n = 32) {
  Model model = Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/" + model_file, 7);
  model.set_fusion(fusion);
  model.to(be, dtype, layout);
  Shape xs{n};
  for (int64_t d : model.input_shape()) xs.push_back(d);
  std::vector<float> values(static_cast<size_t>(shape_numel(xs)));
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (float& v : values) v = normal(rng);
  Tensor x = be.empty(xs, dtype);
  be.ops().cast(be.upload(Tensor::from_floats(values, xs)), x);
  std::vector<int32_t> label_values;
  for (int64_t i = 0; i < n; ++i) label_values.push_back(static_cast<int32_t>((i * 7) % model.num_classes()));
  const Tensor labels = be.upload(Tensor::from_ints(label_values, {n}));

  const Tensor logits = model.forward(be, x, StepInfo{true, 3});
  Tensor loss = be.empty({1}, DType::f32), hits = be.empty({1}, DType::i32);
  Tensor dlogits = be.empty(logits.shape(), logits.dtype());
  be.ops().softmax_cross_entropy(logits, labels, 0.f, loss, dlogits, hits);
  model.backward(be, dlogits);
  ModelStep out;
  out.logits = logits.to_floats();
  for (auto& [name, p] : model.parameters()) out.grads.emplace_back(name, p->grad.to_floats());
  out.eval_logits = model.forward(be, x, StepInfo{}).to_floats();
  return out;
}

inline double l2_norm(const std::vector<float>& v) {
  double sum = 0;
  for (float e : v) sum += double(e) * e;
  return std::sqrt(sum);
}

// The floor below which a norm is taken as zero (no division by 0).
inline constexpr double kNormFloor = 1e-15;

// ||a - b|| / max(||b||, floor): small for the same computation in another order, ~1 for a
// scrambled one. A floor measures a b that is itself rounding against a larger scale.
inline double relative_difference(const std::vector<float>& a, const std::vector<float>& b,
                                  double floor = kNormFloor) {
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(diff) / std::max(l2_norm(b), floor);
}

// Gradient errors of `step` against the reference, one per parameter.
inline std::vector<double> grad_errors(const ModelStep& step, const ModelStep& ref) {
  std::vector<double> out;
  for (size_t i = 0; i < ref.grads.size(); ++i)
    out.push_back(relative_difference(step.grads[i].second, ref.grads[i].second));
  return out;
}

}  // namespace convoy::testing
