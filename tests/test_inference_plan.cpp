// The CPU inference plan (engine/inference): for every shipped model it agrees with the
// training graph's eval-mode forward (Model::forward, layer by layer) within fp32 tolerance,
// with random weights and non-trivial batch-norm statistics; for the small models also with a
// float64 forward built from the reference ops; it re-reads weights that changed; it runs
// several batch sizes and thread counts; a server's batched plans (every batch size from a few
// plans sharing their weights) agree with the layers at every size. The mobile networks' layers
// as plan steps: test_inference_plan_layers.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/core/error.h"
#include "engine/layers/registry.h"
#include "engine/graph/model.h"
#include "engine/inference/batched_plans.h"
#include "engine/inference/inference_plan.h"
#include "engine/inference/plan_cache.h"
#include "tests/batch_norm_stats.h"
#include "tests/plan_reference.h"
#include "tests/reference/reference_ops.h"

namespace convoy {
namespace {

const std::string kModels = std::string(CONVOY_SOURCE_DIR) + "/models/";

using testing::occurrences;
using testing::random_input;
using testing::randomize_batch_norms;
using testing::reference_forward;
using testing::scaled_error;

InferenceOptions options(int threads, int64_t flops_per_thread = 0) {
  InferenceOptions o;
  o.threads = threads;
  o.flops_per_thread = flops_per_thread;
  return o;
}


struct PlanCase {
  const char* file;
  int64_t batch;
  bool float64;  // also against the float64 reference (small models only: it is slow)
};

void PrintTo(const PlanCase& c, std::ostream* os) { *os << c.file << " batch " << c.batch; }

class InferencePlanModels : public ::testing::TestWithParam<PlanCase> {};

TEST_P(InferencePlanModels, AgreesWithTheLayerByLayerForward) {
  const PlanCase c = GetParam();
  Model model = Model::from_file(kModels + c.file, 7);
  randomize_batch_norms(model, 11);
  const std::unique_ptr<Backend> cpu = make_cpu_backend({});
  model.to(*cpu, DType::f32);
  const Tensor x = random_input(model, c.batch, 3);
  const Tensor expected = model.forward(*cpu, x, StepInfo{});  // (N, classes)
  const Tensor x2 = random_input(model, c.batch, 4);
  const Tensor expected2 = model.forward(*cpu, x2, StepInfo{});
  const ref::Vec truth = c.float64 ? reference_forward(model, x2) : ref::Vec{};
  // Both activation layouts, whichever the plan would pick by timing them (PlanLayout::tuned).
  for (const PlanLayout layout : {PlanLayout::blocked, PlanLayout::onednn}) {
    const std::string name = layout == PlanLayout::blocked ? "blocked" : "onednn";
    SCOPED_TRACE(name);
    InferenceOptions options;
    options.layout = layout;
    InferencePlan plan(model, c.batch, options);
    RecordProperty("plan_" + name, plan.describe());  // the steps and their formats, in --gtest_output=xml
    const Tensor got = plan.run(x);
    ASSERT_EQ(got.shape(), expected.shape());
    EXPECT_LT(scaled_error(got, expected), 1e-4) << plan.describe();
    // A second run on other data: nothing left over from the first.
    EXPECT_LT(scaled_error(plan.run(x2), expected2), 1e-4);
    if (c.float64) {
      EXPECT_LT(scaled_error(plan.run(x2), ref::to_tensor(truth, expected2.shape())), 1e-4);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shipped, InferencePlanModels,
                         ::testing::Values(PlanCase{"lenet5.yaml", 1, true}, PlanCase{"lenet5.yaml", 5, true},
                                           PlanCase{"fmnet.yaml", 3, true}, PlanCase{"resnet20.yaml", 2, true},
                                           PlanCase{"resnet18.yaml", 1, false}, PlanCase{"resnet50.yaml", 1, false},
                                           PlanCase{"mobilenet_v2.yaml", 1, false},
                                           PlanCase{"mobilenet_v3_small.yaml", 2, false},
                                           PlanCase{"efficientnet_b0.yaml", 1, false}),
                         [](const auto& info) {
                           std::string name = info.param.file;
                           return name.substr(0, name.find('.')) + "_b" + std::to_string(info.param.batch);
                         });

TEST(InferencePlan, FusesBatchNormResidualAndActivationIntoTheConvolutions) {
  Model model = Model::from_file(kModels + "resnet20.yaml", 1);
  InferencePlan plan(model, 1);
  const std::string steps = plan.describe();
  // 21 convolutions, each with its batch norm folded; 9 residual adds as sum post-ops.
  EXPECT_EQ(occurrences(steps, "+bn"), 21u) << steps;
  EXPECT_EQ(occurrences(steps, "+add"), 9u) << steps;
  EXPECT_EQ(steps.find("batchnorm as depthwise"), std::string::npos) << steps;
}

// The 3x3 stride-1 convolutions run as Winograd where oneDNN has it (its AVX-512 kernels) and
// the batch has at least 16 4x4 output tiles, whatever the team; as direct convolutions with
// InferenceOptions::winograd off (CONVOY_WINOGRAD=0). The Shipped cases check the numbers.
TEST(InferencePlan, ThreeByThreeConvolutionsUseWinogradWhereOneDnnHasIt) {
  Model model = Model::from_file(kModels + "resnet20.yaml", 1);
  auto count_winograd = [&](int64_t batch, int threads, bool winograd = true) {
    InferenceOptions options;
    options.threads = threads;
    options.winograd = winograd;
    return occurrences(InferencePlan(model, batch, options).describe(), "wino");
  };
  EXPECT_EQ(count_winograd(8, 1, false), 0u);
  const std::string cpu = make_cpu_backend({})->describe();
  if (cpu.find("avx512") == std::string::npos) GTEST_SKIP() << "oneDNN has no Winograd kernel for this CPU: " << cpu;
  // 17 of ResNet-20's 21 convolutions are 3x3 stride 1: the stem, and the blocks' but the two
  // that downsample (the other two are the 1x1 shortcuts): seven at 32x32 (64 tiles per image),
  // five at 16x16 (16) and five at 8x8 (4). The 8x8 ones qualify from batch 4.
  EXPECT_EQ(count_winograd(8, 1), 17u) << cpu;
  EXPECT_EQ(count_winograd(4, 16), 17u) << cpu;
  EXPECT_EQ(count_winograd(2, 4), 12u) << cpu;
  EXPECT_EQ(count_winograd(1, 1), 12u) << cpu;
  EXPECT_EQ(count_winograd(1, 16), 12u) << cpu;
}

// Where a convolution runs as Winograd (oneDNN's AVX-512 kernel, which reads and writes
// nChw16c), the blocked layout keeps fp32 activations nChw16c from the stem to the classifier:
// nothing is reordered between layers; oneDNN's choice of formats takes nhwc for the other
// convolutions and reorders around every Winograd one. Without Winograd the formats are
// oneDNN's whatever is asked.
TEST(InferencePlan, KeepsActivationsBlockedWhereWinogradRuns) {
  const std::string cpu = make_cpu_backend({})->describe();
  if (cpu.find("avx512") == std::string::npos) GTEST_SKIP() << "oneDNN has no Winograd kernel for this CPU: " << cpu;
  Model model = Model::from_file(kModels + "resnet20.yaml", 1);  // 16, 32 and 64 channels
  auto blocked_outputs = [](const std::string& steps) {  // of the 21 convolutions and the pooling
    size_t n = 0;
    std::istringstream lines(steps);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("conv", 0) == 0 || line.rfind("global_avg_pool", 0) == 0) n += line.ends_with(" dst f32 blocked 16");
    return n;
  };
  auto plan_steps = [&](PlanLayout layout) {
    InferenceOptions options;
    options.threads = 1;
    options.layout = layout;
    InferencePlan plan(model, 8, options);
    EXPECT_EQ(plan.layout(), layout);
    return plan.describe();
  };
  const std::string steps = plan_steps(PlanLayout::blocked);
  const std::string after_input = steps.substr(steps.find('\n') + 1);  // the first step may reorder the input
  EXPECT_GT(occurrences(steps, "wino"), 0u) << steps;
  EXPECT_EQ(occurrences(after_input, "reorder"), 0u) << steps;
  EXPECT_EQ(blocked_outputs(steps), 22u) << steps;
  const std::string chosen = plan_steps(PlanLayout::onednn);
  EXPECT_GT(occurrences(chosen, "wino"), 0u) << chosen;
  EXPECT_GT(occurrences(chosen.substr(chosen.find('\n') + 1), "reorder"), 0u) << chosen;
  EXPECT_LT(blocked_outputs(chosen), 22u) << chosen;
  InferenceOptions asked_blocked;
  asked_blocked.threads = 1;
  asked_blocked.layout = PlanLayout::blocked;
  asked_blocked.winograd = false;
  const InferencePlan direct(model, 8, asked_blocked);
  EXPECT_EQ(direct.layout(), PlanLayout::onednn);
  EXPECT_LT(blocked_outputs(direct.describe()), 22u) << direct.describe();
}

// By default (PlanLayout::tuned) a plan with Winograd in it is built both ways and keeps the
// one that ran faster; PlanLayout::blocked or onednn (CONVOY_BLOCKED_LAYOUT=1 or 0) skips the
// choice. A plan without Winograd (LeNet-5's 5x5 convolutions) takes oneDNN's formats without
// timing anything.
TEST(InferencePlan, ChoosesTheActivationLayoutByTimingBoth) {
  Model lenet = Model::from_file(kModels + "lenet5.yaml", 1);
  EXPECT_EQ(InferencePlan(lenet, 4).layout(), PlanLayout::onednn);
  const std::string cpu = make_cpu_backend({})->describe();
  if (cpu.find("avx512") == std::string::npos) GTEST_SKIP() << "oneDNN has no Winograd kernel for this CPU: " << cpu;
  Model model = Model::from_file(kModels + "resnet20.yaml", 1);
  const Tensor x = random_input(model, 8, 5);
  InferenceOptions explicit_blocked;
  explicit_blocked.layout = PlanLayout::blocked;
  const Tensor expected = InferencePlan(model, 8, explicit_blocked).run(x).clone();
  InferencePlan tuned(model, 8);
  EXPECT_TRUE(tuned.layout() == PlanLayout::blocked || tuned.layout() == PlanLayout::onednn);
  const size_t reorders = occurrences(tuned.describe().substr(tuned.describe().find('\n') + 1), "reorder");
  EXPECT_EQ(reorders > 0, tuned.layout() == PlanLayout::onednn) << tuned.describe();
  EXPECT_LT(scaled_error(tuned.run(x), expected), 1e-4);
  for (const PlanLayout layout : {PlanLayout::blocked, PlanLayout::onednn}) {
    InferenceOptions asked;
    asked.layout = layout;
    EXPECT_EQ(InferencePlan(model, 8, asked).layout(), layout);
  }
}

TEST(InferencePlan, RereadsWeightsThatChanged) {
  Model model = Model::from_file(kModels + "lenet5.yaml", 2);
  const std::unique_ptr<Backend> cpu = make_cpu_backend({});
  InferencePlan plan(model, 2);
  const Tensor x = random_input(model, 2, 5);
  const Tensor before = plan.run(x).clone();  // a copy: run() reuses its output
  // A checkpoint's weights, as convoy infer loads them: load_state counts as a change.
  Model other = Model::from_file(kModels + "lenet5.yaml", 3);
  randomize_batch_norms(other, 9);
  model.load_state(other.state(), "other");
  const Tensor after = plan.run(x);
  EXPECT_GT(scaled_error(after, before), 1e-3);
  EXPECT_LT(scaled_error(after, model.forward(*cpu, x, StepInfo{})), 1e-4);
  // Written through a kept Parameter pointer (as an optimizer does): seen after mark_weights_changed().
  Parameter* w = model.parameters().front().second;
  const Tensor stale = plan.run(x).clone();
  for (int64_t i = 0; i < w->value.numel(); ++i) w->value.data<float>()[i] *= -1.0f;
  model.mark_weights_changed();
  EXPECT_GT(scaled_error(plan.run(x), stale), 1e-3);
  EXPECT_LT(scaled_error(plan.run(x), model.forward(*cpu, x, StepInfo{})), 1e-4);
}

TEST(InferencePlan, ThreadCountsAndBatchSizes) {
  Model model = Model::from_file(kModels + "fmnet.yaml", 4);
  randomize_batch_norms(model, 5);
  const std::unique_ptr<Backend> cpu = make_cpu_backend({});
  for (int threads : {1, 2}) {
    InferencePlans plans(options(threads));
    for (int64_t batch : {1, 7, 1}) {
      const Tensor x = random_input(model, batch, static_cast<uint64_t>(batch));
      const Tensor* got = plans.run(model, x);
      ASSERT_NE(got, nullptr) << plans.why();
      EXPECT_LT(scaled_error(*got, model.forward(*cpu, x, StepInfo{})), 1e-4) << threads << " threads, batch " << batch;
    }
  }
  // Latency first: a small pass gets one thread per flops_per_thread of it when the count is
  // left to the plan, at least one and at most all.
  Model lenet = Model::from_file(kModels + "lenet5.yaml", 1);
  const int64_t flops = lenet.forward_flops();
  const int all = InferencePlan(lenet, 8, {}).threads();
  EXPECT_EQ(InferencePlan(lenet, 1, options(0, flops + 1)).threads(), 1);
  EXPECT_EQ(InferencePlan(lenet, 1, options(0, flops / 2)).threads(), std::min(all, 2));
  EXPECT_EQ(InferencePlan(lenet, 64, options(0, flops)).threads(), std::min(all, 64));
  EXPECT_EQ(InferencePlan(lenet, 1, options(2, flops + 1)).threads(), 2);  // an explicit count stands
}

TEST(InferencePlan, RefusesWrongInputs) {
  Model model = Model::from_file(kModels + "lenet5.yaml", 1);
  InferencePlan plan(model, 2);
  EXPECT_THROW(plan.run(random_input(model, 3, 1)), InputError);
  EXPECT_THROW(InferencePlan(model, 0), InputError);
}

TEST(BatchedPlans, PassesCoverEveryBatchWithLittlePadding) {
  using Sizes = std::vector<int64_t>;
  EXPECT_EQ(BatchedPlans::planned_sizes(1), Sizes{1});
  EXPECT_EQ(BatchedPlans::planned_sizes(32), (Sizes{1, 2, 4, 8, 16, 32}));
  EXPECT_EQ(BatchedPlans::planned_sizes(10), (Sizes{1, 2, 4, 8, 10}));
  EXPECT_THROW(BatchedPlans::planned_sizes(0), InputError);
  const Sizes s32 = BatchedPlans::planned_sizes(32);
  EXPECT_EQ(BatchedPlans::passes(5, s32), (Sizes{4, 1}));   // 8 would pad 3 of 8
  EXPECT_EQ(BatchedPlans::passes(6, s32), (Sizes{8}));      // pads 2 of 8
  EXPECT_EQ(BatchedPlans::passes(17, s32), (Sizes{16, 1}));
  EXPECT_EQ(BatchedPlans::passes(24, s32), (Sizes{32}));
  EXPECT_EQ(BatchedPlans::passes(9, BatchedPlans::planned_sizes(10)), (Sizes{10}));
  for (int64_t max : {1, 3, 10, 32, 100})
    for (int64_t n = 1; n <= max; ++n) {
      const Sizes sizes = BatchedPlans::planned_sizes(max), p = BatchedPlans::passes(n, sizes);
      int64_t covered = 0;
      for (size_t i = 0; i < p.size(); ++i) {
        ASSERT_TRUE(std::binary_search(sizes.begin(), sizes.end(), p[i])) << n << " of " << max;
        if (i + 1 < p.size()) {
          EXPECT_LE(p[i], n - covered) << "only the last pass pads";
        }
        covered += p[i];
      }
      EXPECT_GE(covered, n);
      EXPECT_LE((covered - n) * 4, p.back()) << n << " of " << max << ": padding over a quarter of a pass";
    }
}

TEST(BatchedPlans, AgreeWithTheLayersAtEveryBatchSizeAndShareWeights) {
  Model model = Model::from_file(kModels + "resnet20.yaml", 6);
  randomize_batch_norms(model, 7);
  const std::unique_ptr<Backend> cpu = make_cpu_backend({});
  BatchedPlans plans(model, 6, options(2));
  EXPECT_EQ(plans.sizes(), (std::vector<int64_t>{1, 2, 4, 6}));
  for (int64_t n = 1; n <= 6; ++n) {
    const Tensor x = random_input(model, n, static_cast<uint64_t>(10 + n));
    const Tensor got = plans.run(x);
    ASSERT_EQ(got.shape(), (Shape{n, model.num_classes()}));
    EXPECT_LT(scaled_error(got, model.forward(*cpu, x, StepInfo{})), 1e-4) << "batch " << n;
  }
  EXPECT_THROW(plans.run(random_input(model, 7, 1)), InputError);
  // The four plans run one at a time: they share one arena, and the weights they want in the
  // same layout. They hold less than four plans of their own would, and at least what the largest
  // of those would.
  size_t arenas = 0, own = 0, largest_arena = 0, largest_weights = 0;
  for (int64_t size : plans.sizes()) {
    const InferencePlan alone(model, size, options(2));
    arenas += alone.arena_bytes();
    own += alone.weight_bytes();
    largest_arena = std::max(largest_arena, alone.arena_bytes());
    largest_weights = std::max(largest_weights, alone.weight_bytes());
  }
  EXPECT_LT(plans.bytes(), arenas + own);
  EXPECT_GE(plans.bytes(), largest_arena + largest_weights);
  // A change of weights reaches every size through the shared copies.
  Model other = Model::from_file(kModels + "resnet20.yaml", 8);
  randomize_batch_norms(other, 9);
  model.load_state(other.state(), "other");
  for (int64_t n : {1, 3, 6}) {
    const Tensor x = random_input(model, n, static_cast<uint64_t>(20 + n));
    EXPECT_LT(scaled_error(plans.run(x), model.forward(*cpu, x, StepInfo{})), 1e-4) << "batch " << n << " after a change";
  }
}

}  // namespace
}  // namespace convoy
