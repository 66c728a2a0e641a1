// Model::fold_batch_norms: each batch norm that alone reads a convolution's output runs the
// convolution itself, with the weights scaled and the shift as a bias (Ops::conv2d_forward_fused;
// the CPU composes it, cuDNN fuses it: tests/cuda/test_cuda_fold.cpp). The folded forward equals
// the unfolded one; to() undoes the fold; a folded model refuses to train.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/core/error.h"
#include "engine/graph/model.h"
#include "engine/layers/batch_norm_fold.h"
#include "tests/batch_norm_stats.h"
#include "tests/model_step.h"

namespace convoy {
namespace {

using testing::randomize_batch_norms;
using testing::relative_difference;

const std::string kModels = std::string(CONVOY_SOURCE_DIR) + "/models/";


Tensor random_input(const Shape& shape, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (float& e : v) e = normal(rng);
  return Tensor::from_floats(v, shape);
}

int count_pairs(Model& model) {  // convolutions read only by a batch norm
  int n = 0;
  const auto nodes = model.graph_nodes();
  for (const Model::GraphNode& node : nodes)
    if (std::holds_alternative<BatchNormSpec>(node.layer->spec()) && node.inputs.size() == 1 &&
        node.inputs[0] >= 0 && std::holds_alternative<Conv2dSpec>(nodes[node.inputs[0]].layer->spec()))
      ++n;
  return n;
}

// batch_norm_fold.h, the one fold the GPU's fused convolutions, the CPU plan and the 8-bit plan
// share: a layer of 3 output channels (4 weights each, a bias) followed by a batch norm with an
// odd eps equals, in float64, the folded layer, for a random input.
TEST(FoldBatchNorms, TheSharedFoldEqualsTheLayerThenTheBatchNormInFloat64) {
  Model model = Model::from_yaml(R"(
name: fold
input: [1, 2, 2]
layers:
  - {name: conv, type: conv2d, out_channels: 3, kernel: 2, bias: true}
  - {name: bn, type: batchnorm2d, eps: 0.01}
  - {name: flat, type: flatten}
)",
                                 "fold.yaml", 3);
  randomize_batch_norms(model, 11);
  const std::vector<Model::GraphNode> nodes = model.graph_nodes();
  Layer& conv = *nodes.at(0).layer;
  Layer& bn = *nodes.at(1).layer;
  const std::vector<float> w = conv.parameters().at(0)->value.to_floats();
  const std::vector<float> b = conv.parameters().at(1)->value.to_floats();
  const std::vector<float> gamma = bn.parameters().at(0)->value.to_floats(), beta = bn.parameters().at(1)->value.to_floats(),
                           mean = bn.buffers().at(0)->value.to_floats(), var = bn.buffers().at(1)->value.to_floats();
  ASSERT_EQ(w.size(), 12u);
  std::vector<float> folded_w = w, folded_b = b;
  fold_batch_norm(batch_norm_affine(bn), folded_w, folded_b);
  std::mt19937 rng(5);
  std::normal_distribution<double> normal(0, 1);
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<double> x(4);
    for (double& v : x) v = normal(rng);
    for (size_t o = 0; o < 3; ++o) {
      double layer = b[o], fold = folded_b[o];
      for (size_t j = 0; j < 4; ++j) {
        layer += static_cast<double>(w[o * 4 + j]) * x[j];
        fold += static_cast<double>(folded_w[o * 4 + j]) * x[j];
      }
      const double reference = (layer - mean[o]) / std::sqrt(static_cast<double>(var[o]) + 0.01) * gamma[o] + beta[o];
      EXPECT_NEAR(fold, reference, 1e-6 * (1 + std::abs(reference))) << "channel " << o;
    }
  }
  // Sizes that do not match the channels are refused, not read past.
  std::vector<float> short_bias(2);
  EXPECT_THROW(fold_batch_norm(batch_norm_affine(bn), folded_w, short_bias), InternalError);
}

TEST(FoldBatchNorms, FoldedForwardEqualsTheUnfoldedOneAndToUndoesIt) {
  auto cpu = make_cpu_backend({});
  for (const char* file : {"resnet20.yaml", "resnet18.yaml", "fmnet.yaml"}) {
    SCOPED_TRACE(file);
    Model model = Model::from_file(kModels + file, 3);
    randomize_batch_norms(model, 5);
    model.to(*cpu, DType::f32);
    const Shape& in = model.input_shape();
    const Tensor x = random_input({2, in[0], in[1], in[2]}, 9);
    const std::vector<float> unfolded = model.forward(*cpu, x, StepInfo{}).to_floats();
    const uint64_t version = model.weights_version();

    const int folded = model.fold_batch_norms(*cpu);
    EXPECT_EQ(folded, count_pairs(model)) << "every convolution + batch norm pair folds";
    EXPECT_GT(folded, 0);
    EXPECT_EQ(model.folded_batch_norms(), folded);
    EXPECT_NE(model.weights_version(), version) << "recordings of the unfolded forward must go stale";
    const std::vector<float> with_fold = model.forward(*cpu, x, StepInfo{}).to_floats();
    EXPECT_LE(relative_difference(with_fold, unfolded), 2e-5);
    EXPECT_NE(with_fold, unfolded) << "the folded weights ran (a float fold rounds differently)";

    StepInfo train;
    train.training = true;
    EXPECT_THROW(model.forward(*cpu, x, train), std::logic_error) << "a folded model cannot train";

    model.to(*cpu, DType::f32);
    EXPECT_EQ(model.folded_batch_norms(), 0) << "to() undoes the fold";
    EXPECT_EQ(model.forward(*cpu, x, StepInfo{}).to_floats(), unfolded);
  }
}

TEST(FoldBatchNorms, NothingFoldsWithFusionOffOrWithoutBatchNorm) {
  auto cpu = make_cpu_backend({});
  Model resnet = Model::from_file(kModels + "resnet20.yaml", 3);
  resnet.set_fusion(false);
  resnet.to(*cpu, DType::f32);
  EXPECT_EQ(resnet.fold_batch_norms(*cpu), 0);
  // A batch norm after a pooling, and a convolution whose output two layers read: neither folds.
  Model odd = Model::from_yaml(R"(
name: odd
input: [3, 8, 8]
classes: 4
layers:
  - {name: conv1, type: conv2d, out_channels: 4, kernel: 3, padding: 1}
  - {name: pool, type: maxpool2d, kernel: 2}
  - {name: bn1, type: batchnorm2d}
  - {name: conv2, type: conv2d, out_channels: 4, kernel: 1}
  - {name: bn2, type: batchnorm2d}
  - {name: join, type: add, inputs: [conv2, bn2]}
  - {name: gap, type: global_avg_pool}
  - {name: flat, type: flatten}
  - {name: fc, type: linear, out_features: 4}
)", "odd", 3);
  odd.to(*cpu, DType::f32);
  EXPECT_EQ(odd.fold_batch_norms(*cpu), 0);
}

}  // namespace
}  // namespace convoy
