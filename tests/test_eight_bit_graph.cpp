// The GPU 8-bit plan's steps as engine/inference builds them (eight_bit_graph.h), checked on the
// CPU: which layers become which steps, the folded weights against a float64 fold, the ranges by
// node, and the refusals that name a layer (the plan itself runs in tests/cuda/test_eight_bit_plan.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/core/error.h"
#include "engine/inference/eight_bit_graph.h"
#include "engine/inference/inference_plan.h"
#include "tests/eight_bit_net.h"

namespace convoy {
namespace {

// Every graph node gets a range of its own (node i + 1 -> 1 + i / 8), the input 0.5.
std::vector<float> ranges_for(Model& m) {
  std::vector<float> r(m.graph_nodes().size() + 1, 0.0f);
  r[0] = 0.5f;
  for (size_t i = 1; i < r.size(); ++i) r[i] = 1.0f + static_cast<float>(i) / 8;
  return r;
}

TEST(EightBitGraph, TheNetsLayersBecomeFusedStepsWithFoldedWeights) {
  Model m = Model::from_yaml(testing::kEightBitNetYaml, "eight_bit_net", 7);
  // Batch norms with statistics of their own, so that folding changes something.
  for (auto& [name, p] : m.parameters())
    if (name.find("_bn.") != std::string::npos) {
      std::vector<float> v = p->value.to_floats();
      for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5f + 0.01f * static_cast<float>(i % 17);
      p->value.copy_from(Tensor::from_floats(v, p->value.shape()));
    }
  const std::vector<float> ranges = ranges_for(m);
  const EightBitGraph g = eight_bit_graph(m, ranges, EightBitType::int8);
  using Kind = EightBitStep::Kind;
  const std::vector<std::pair<std::string, Kind>> want = {
      {"stem_relu", Kind::conv}, {"c1_relu", Kind::conv},   {"join_relu", Kind::conv}, {"pool", Kind::max_pool},
      {"c3_relu", Kind::conv},   {"gap", Kind::avg_pool},   {"flat", Kind::flatten},   {"fc", Kind::linear}};
  ASSERT_EQ(g.steps.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(g.steps[i].name, want[i].first) << i;
    EXPECT_EQ(g.steps[i].kind, want[i].second) << i;
  }
  EXPECT_EQ(g.input, (Shape{1, 28, 28}));
  EXPECT_EQ(g.input_range, 0.5f);
  // The residual join: c2's step adds c1's output (value 2) and applies the ReLU.
  EXPECT_EQ(g.steps[2].residual, 2);
  EXPECT_TRUE(g.steps[2].relu);
  EXPECT_EQ(g.steps[2].input, 2);
  // Ranges by node: a conv group's is its last node's; pools keep their input's; the logits none.
  const std::vector<Model::GraphNode> nodes = m.graph_nodes();
  auto node_index = [&](const std::string& name) {
    for (size_t i = 0; i < nodes.size(); ++i)
      if (nodes[i].layer->name() == name) return i;
    return nodes.size();
  };
  EXPECT_EQ(g.steps[1].range, ranges[node_index("c1_relu") + 1]);
  EXPECT_EQ(g.steps[3].range, 0.0f);
  EXPECT_EQ(g.steps.back().range, 0.0f);
  // c1's folded weights and bias against the fold in float64.
  Layer& conv = *nodes[node_index("c1")].layer;
  Layer& bn = *nodes[node_index("c1_bn")].layer;
  const std::vector<float> w = conv.parameters()[0]->value.to_floats();
  const std::vector<float> gamma = bn.parameters()[0]->value.to_floats(), beta = bn.parameters()[1]->value.to_floats();
  const std::vector<float> mean = bn.buffers()[0]->value.to_floats(), var = bn.buffers()[1]->value.to_floats();
  const std::vector<float> fw = g.steps[1].weight.to_floats(), fb = g.steps[1].bias.to_floats();
  ASSERT_EQ(fw.size(), w.size());
  const size_t k = fb.size(), per_k = w.size() / k;
  for (size_t o = 0; o < k; ++o) {
    const double s = gamma[o] / std::sqrt(static_cast<double>(var[o]) + 1e-5);
    EXPECT_NEAR(fb[o], beta[o] - mean[o] * s, 1e-6) << o;
    for (size_t j = 0; j < per_k; j += 7) EXPECT_NEAR(fw[o * per_k + j], w[o * per_k + j] * s, 1e-6 * std::fabs(s));
  }
}

TEST(EightBitGraph, ALayerThePlanCannotRunIsNamed) {
  // fmnet's stem is followed by a GELU; its blocks put a pool between convolution and batch norm.
  Model fmnet = Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/fmnet.yaml", 1);
  const std::string why = eight_bit_unsupported_reason(fmnet);
  EXPECT_NE(why.find("layer 'stem_act' (gelu): an activation other than ReLU"), std::string::npos) << why;
  EXPECT_THROW(eight_bit_graph(fmnet, ranges_for(fmnet), EightBitType::fp8), InputError);
  Model resnet = Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/resnet18.yaml", 1);
  EXPECT_EQ(eight_bit_unsupported_reason(resnet), "");
  Model mobile = Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/mobilenet_v2.yaml", 1);
  EXPECT_NE(eight_bit_unsupported_reason(mobile), "") << "ReLU6 and depthwise convolutions";
}

TEST(EightBitGraph, TheCpuBackendRefusesToCompileOneAndSaysWhy) {
  Model m = Model::from_yaml(testing::kEightBitNetYaml, "eight_bit_net", 7);
  const EightBitGraph g = eight_bit_graph(m, ranges_for(m), EightBitType::int8);
  const std::unique_ptr<Backend> cpu = make_cpu_backend({});
  try {
    cpu->compile_8bit(g, 4);
    FAIL() << "the CPU compiled a GPU 8-bit plan";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("run on CUDA GPUs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace convoy
