// ReLU fusion (Model::fuse_relus, Layer::fuse_relu): a ReLU after a batch norm or an add is
// done by that layer, residual joins' adds by a batch norm they read (Layer::forward_adding),
// and their gradient sums by a convolution (Layer::backward_adding); the step computed is the
// unfused step's.
#include <gtest/gtest.h>

#include <cstdlib>

#include "engine/backends/backend.h"
#include "engine/graph/model.h"
#include "tests/model_step.h"

using namespace convoy;
using convoy::testing::grad_errors;
using convoy::testing::model_step;
using convoy::testing::relative_difference;

namespace {

std::string model_path(const std::string& file) { return std::string(CONVOY_SOURCE_DIR) + "/models/" + file; }

TEST(ReluFusion, FusesEveryReluThatFollowsABatchNormOrAnAddAndNothingElse) {
  auto cpu = make_cpu_backend({});
  // resnet20: the stem's and each block's first bn-relu and each block's add-relu: 1 + 9 + 9.
  Model resnet = Model::from_file(model_path("resnet20.yaml"), 1);
  resnet.to(*cpu, DType::f32);
  EXPECT_EQ(resnet.fused_relus(), 19);
  // lenet5: the two after batch norms fuse, the one after fc1 (a linear layer) does not.
  Model lenet = Model::from_file(model_path("lenet5.yaml"), 1);
  lenet.to(*cpu, DType::f32);
  EXPECT_EQ(lenet.fused_relus(), 2);
  // Off, and back on with the next to().
  resnet.set_fusion(false);
  resnet.to(*cpu, DType::f32);
  EXPECT_EQ(resnet.fused_relus(), 0);
  resnet.set_fusion(true);
  resnet.to(*cpu, DType::f32);
  EXPECT_EQ(resnet.fused_relus(), 19);
}

TEST(ReluFusion, ABatchNormReadByTwoLayersKeepsItsRelu) {
  const std::string yaml = R"(name: shared
input: [2, 4, 4]
layers:
  - {name: bn, type: batchnorm2d}
  - {name: act, type: relu}
  - {name: other, type: relu, inputs: [bn]}
  - {name: sum, type: add, inputs: [act, other]}
  - {name: out, type: relu}
  - {name: flat, type: flatten}
  - {name: fc, type: linear, out_features: 3}
)";
  auto cpu = make_cpu_backend({});
  Model m = Model::from_yaml(yaml, "shared.yaml", 1);
  m.to(*cpu, DType::f32);
  EXPECT_EQ(m.fused_relus(), 1);  // only `out` (after the add); bn has two readers
}

TEST(ReluFusion, SwitchTurnsItOff) {  // EngineOptions::fusion, CONVOY_FUSION=0
  auto cpu = make_cpu_backend({});
  Model m = Model::from_file(model_path("resnet20.yaml"), 1);
  m.set_fusion(false);
  m.to(*cpu, DType::f32);
  EXPECT_EQ(m.fused_relus(), 0);
}

// Each residual join's gradient sum is done by the convolution reading the block's input
// (cuDNN's data gradient with beta = 1; on the CPU into a temporary, then added): resnet20's 9
// blocks, 7 with an identity shortcut and 2 with a 1x1 convolution. Off with the fusion.
TEST(GradientSumsInOp, EveryResidualJoinOfResnet20IsSummedByItsConvolution) {
  auto cpu = make_cpu_backend({});
  for (const bool fusion : {true, false}) {
    Model m = Model::from_file(model_path("resnet20.yaml"), 1);
    m.set_fusion(fusion);
    m.to(*cpu, DType::f32);
    const Shape xs{2, 3, 32, 32};
    Tensor x = Tensor::zeros(xs);
    const Tensor logits = m.forward(*cpu, x, StepInfo{true, 3});
    m.backward(*cpu, Tensor::from_floats(std::vector<float>(logits.numel(), 0.1f), logits.shape()));
    EXPECT_EQ(m.gradient_sums_in_op(), fusion ? 9 : 0) << "fusion " << fusion;
  }
}

// Each residual join's add (with its ReLU) is done by a batch norm it reads, in that batch
// norm's pass (Layer::forward_adding): resnet20's 9 joins, the 2 downsampling ones included
// (one of their two batch norms takes it). Off with the fusion.
TEST(AddFusion, EveryResidualJoinOfResnet20IsAddedByABatchNorm) {
  auto cpu = make_cpu_backend({});
  Model m = Model::from_file(model_path("resnet20.yaml"), 1);
  m.to(*cpu, DType::f32);
  EXPECT_EQ(m.fused_adds(), 9);
  m.set_fusion(false);
  m.to(*cpu, DType::f32);
  EXPECT_EQ(m.fused_adds(), 0);
}

// A batch norm whose output another layer also reads must write it: the add stays an add
// (here its other input is a ReLU, which cannot add either).
TEST(AddFusion, AJoinOnlyFusesIntoABatchNormNothingElseReads) {
  const std::string yaml = R"(name: shared
input: [2, 4, 4]
layers:
  - {name: bn, type: batchnorm2d}
  - {name: act, type: relu, inputs: [bn]}
  - {name: sum, type: add, inputs: [bn, act]}
  - {name: flat, type: flatten}
  - {name: fc, type: linear, out_features: 3}
)";
  auto cpu = make_cpu_backend({});
  Model m = Model::from_yaml(yaml, "shared.yaml", 1);
  m.to(*cpu, DType::f32);
  EXPECT_EQ(m.fused_adds(), 0);
}

// An observer (`convoy bench --profile`) sees every layer's forward once, in pairs: a fused
// join's batch norm with the add and ReLU it does, then the add, doing nothing.
TEST(AddFusion, AnObserverTimesAJoinsBatchNormAndItsAdd) {
  struct Calls final : LayerObserver {
    std::vector<std::pair<int, bool>> seen;  // (node, is before)
    void before(int node, bool backward) override {
      if (!backward) seen.emplace_back(node, true);
    }
    void after(int node, bool backward) override {
      if (!backward) seen.emplace_back(node, false);
    }
  } calls;
  auto cpu = make_cpu_backend({});
  Model m = Model::from_file(model_path("resnet20.yaml"), 1);
  m.to(*cpu, DType::f32);
  ASSERT_EQ(m.fused_adds(), 9);
  m.set_observer(&calls);
  m.forward(*cpu, cpu->upload(Tensor::zeros({2, 3, 32, 32})), StepInfo{true, 1});
  m.set_observer(nullptr);
  const std::vector<LayerInfo> infos = m.layer_infos();
  std::vector<int> times(infos.size(), 0);
  ASSERT_EQ(calls.seen.size() % 2, 0u);
  for (size_t k = 0; k < calls.seen.size(); k += 2) {
    EXPECT_EQ(calls.seen[k].first, calls.seen[k + 1].first);
    EXPECT_TRUE(calls.seen[k].second && !calls.seen[k + 1].second);
    ++times[static_cast<size_t>(calls.seen[k].first)];
  }
  for (size_t i = 0; i < infos.size(); ++i) EXPECT_EQ(times[i], 1) << infos[i].name;
}

// The fused ops compute the unfused ones' values (the ReLU's mask recomputed from x in the batch
// norm's backward), so on the CPU the two steps agree to f32 rounding.
TEST(ReluFusion, FusedResnetStepEqualsTheUnfusedStepOnTheCpu) {
  auto cpu = make_cpu_backend({});
  const auto fused = model_step(*cpu, "resnet20.yaml", DType::f32, Layout::nchw, true, 8);
  const auto plain = model_step(*cpu, "resnet20.yaml", DType::f32, Layout::nchw, false, 8);
  EXPECT_LE(relative_difference(fused.logits, plain.logits), 1e-6);
  EXPECT_LE(relative_difference(fused.eval_logits, plain.eval_logits), 1e-6);
  const std::vector<double> err = grad_errors(fused, plain);
  for (size_t i = 0; i < err.size(); ++i) EXPECT_LE(err[i], 1e-5) << plain.grads[i].first;
}

}  // namespace
