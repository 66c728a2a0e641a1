// The CPU inference plan with the mobile and efficient networks' layers (tests/plan_reference.h
// for the float64 forward): their activations fused into convolutions and alone,
// squeeze-and-excitation's mul as a binary step, upsampling and softmax as plan steps, each in
// both activation layouts against the layers and the float64 reference.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/graph/model.h"
#include "engine/inference/inference_plan.h"
#include "tests/batch_norm_stats.h"
#include "tests/plan_reference.h"
#include "tests/reference/reference_ops.h"

namespace convoy {
namespace {

using testing::occurrences;
using testing::random_input;
using testing::randomize_batch_norms;
using testing::reference_forward;
using testing::scaled_error;

// The mobile networks' activations, fused into convolutions as post-ops (hardsigmoid as two: its
// clip and its affine tail) and alone (after pooling, on the input): the plan agrees with the
// layers and with the float64 reference. Inputs over -8 ... 8 and convolution weights x3 reach the
// saturated sides of relu6, hardsigmoid and hardswish.
TEST(InferencePlan, MobileActivationsFusedAndAloneAgreeWithTheReference) {
  Model model = Model::from_yaml(R"(name: mobile_activations
input: [3, 8, 8]
layers:
  - {name: alone_hsig, type: hardsigmoid}
  - {name: c1, type: conv2d, out_channels: 8, kernel: 3, padding: 1, inputs: [input]}
  - {name: r6, type: relu6}
  - {name: c2, type: conv2d, out_channels: 8, kernel: 3, padding: 1}
  - {name: hsw, type: hardswish}
  - {name: c3, type: conv2d, out_channels: 8, kernel: 1, inputs: [alone_hsig]}
  - {name: hsig, type: hardsigmoid}
  - {name: sum, type: add, inputs: [hsw, hsig]}
  - {name: c4, type: conv2d, out_channels: 8, kernel: 3, stride: 2, padding: 1}
  - {name: si, type: silu}
  - {name: pool, type: maxpool2d, kernel: 2}
  - {name: sg, type: sigmoid}
  - {name: alone_r6, type: relu6, inputs: [pool]}
  - {name: alone_si, type: silu, inputs: [pool]}
  - {name: alone_hsw, type: hardswish, inputs: [pool]}
  - {name: sum2, type: add, inputs: [sg, alone_r6]}
  - {name: sum3, type: add, inputs: [alone_si, alone_hsw]}
  - {name: sum4, type: add, inputs: [sum2, sum3]}
  - {name: gap, type: global_avg_pool}
  - {name: fc, type: linear, out_features: 5}
)",
                                 "mobile_activations.yaml", 5);
  for (auto& [name, p] : model.parameters())
    if (name.rfind('c', 0) == 0)
      for (int64_t i = 0; i < p->value.numel(); ++i) p->value.data<float>()[i] *= 3.0f;
  model.mark_weights_changed();
  const std::unique_ptr<Backend> cpu = make_cpu_backend({});
  model.to(*cpu, DType::f32);
  Tensor x = random_input(model, 2, 9);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] *= 8.0f;
  const Tensor expected = model.forward(*cpu, x, StepInfo{});
  const ref::Vec truth = reference_forward(model, x);
  InferencePlan plan(model, 2);
  const std::string steps = plan.describe();
  for (const char* fused : {"+relu6", "+hardswish", "+hardsigmoid", "+silu"})
    EXPECT_NE(steps.find(fused), std::string::npos) << fused << " not fused: " << steps;
  const Tensor got = plan.run(x);
  EXPECT_LT(scaled_error(got, expected), 1e-4) << steps;
  EXPECT_LT(scaled_error(got, ref::to_tensor(truth, expected.shape())), 1e-4) << steps;
}

// A plan of `model` (on `cpu`) at `batch`, in both activation layouts: each needle occurs in its
// steps as often as given, and its logits agree with the layers' and the float64 reference's
// within `tolerance` (the layers themselves with the reference within 1e-5).
void expect_plan_steps_agree(Model& model, Backend& cpu, int64_t batch,
                             const std::vector<std::pair<std::string, size_t>>& steps_expected, double tolerance) {
  const Tensor x = random_input(model, batch, 9);
  const Tensor expected = model.forward(cpu, x, StepInfo{});
  const Tensor truth = ref::to_tensor(reference_forward(model, x), expected.shape());
  EXPECT_LT(scaled_error(expected, truth), 1e-5);
  for (const PlanLayout layout : {PlanLayout::blocked, PlanLayout::onednn}) {
    InferenceOptions options;
    options.layout = layout;
    InferencePlan plan(model, batch, options);
    const std::string steps = plan.describe();
    for (const auto& [needle, count] : steps_expected) EXPECT_EQ(occurrences(steps, needle), count) << steps;
    const Tensor got = plan.run(x);
    EXPECT_LT(scaled_error(got, expected), tolerance) << steps;
    EXPECT_LT(scaled_error(got, truth), tolerance) << steps;
  }
}

// Squeeze-and-excitation's mul as a binary step: its factor (N, C, 1, 1) after 1x1 convolutions,
// and (N, C) after a linear layer, given first; in both layouts (16 channels: blocked too).
TEST(InferencePlan, SqueezeExcitationMulAgreesWithTheReference) {
  Model model = Model::from_yaml(R"(name: se
input: [3, 8, 8]
layers:
  - {name: c1, type: conv2d, out_channels: 16, kernel: 3, padding: 1}
  - {name: bn, type: batchnorm2d}
  - {name: act, type: silu}
  - {name: gap, type: global_avg_pool}
  - {name: fc1, type: conv2d, out_channels: 4, kernel: 1}
  - {name: r, type: relu}
  - {name: fc2, type: conv2d, out_channels: 16, kernel: 1}
  - {name: s, type: hardsigmoid}
  - {name: se, type: mul, inputs: [act, s]}
  - {name: c2, type: conv2d, out_channels: 16, kernel: 3, padding: 1}
  - {name: gap2, type: global_avg_pool}
  - {name: flat, type: flatten}
  - {name: lin, type: linear, out_features: 16}
  - {name: sg, type: sigmoid}
  - {name: se2, type: mul, inputs: [sg, c2]}
  - {name: gap3, type: global_avg_pool}
  - {name: fc, type: linear, out_features: 5}
)",
                                 "se.yaml", 5);
  randomize_batch_norms(model, 12);
  const std::unique_ptr<Backend> cpu = make_cpu_backend({});
  model.to(*cpu, DType::f32);
  expect_plan_steps_agree(model, *cpu, 3, {{"mul (per channel)", 2}}, 1e-4);
}

// Upsampling (nearest by a factor, bilinear to a size that is no multiple, 16 channels: the blocked
// layout's) and softmax over the channels of planes and of the logits run as plan steps, in both
// activation layouts, and agree with the layers and with the float64 reference.
TEST(InferencePlan, UpsampleAndSoftmaxStepsAgreeWithTheReference) {
  Model model = Model::from_yaml(R"(name: upsample_softmax
input: [3, 5, 6]
layers:
  - {name: c1, type: conv2d, out_channels: 16, kernel: 3, padding: 1}
  - {name: up, type: upsample, scale: [2, 3]}
  - {name: c2, type: conv2d, out_channels: 16, kernel: 3, padding: 1}
  - {name: bi, type: upsample, mode: bilinear, size: [13, 7]}
  - {name: sm, type: softmax}
  - {name: c3, type: conv2d, out_channels: 16, kernel: 3, stride: 2}
  - {name: gap, type: global_avg_pool}
  - {name: fc, type: linear, out_features: 5}
  - {name: probs, type: softmax}
)",
                                 "upsample_softmax.yaml", 5);
  const std::unique_ptr<Backend> cpu = make_cpu_backend({});
  model.to(*cpu, DType::f32);
  expect_plan_steps_agree(model, *cpu, 2, {{"upsample", 2}, {"softmax", 2}}, 1e-5);
}

}  // namespace
}  // namespace convoy
