// The shipped ResNets (models/resnet*.yaml, written by models/generate_resnets.py): torchvision's
// parameter counts exactly, the CIFAR ones' option-B counts, shapes through the whole DAG,
// a forward pass on the CPU, and ResNet-50's FLOPs.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "engine/backends/backend.h"
#include "engine/graph/model.h"

namespace convoy {
namespace {

const std::string kModels = std::string(CONVOY_SOURCE_DIR) + "/models/";

struct ResNetCase {
  const char* file;
  int64_t parameters;  // torchvision's sum(p.numel() for p in model.parameters()), or option B's
  Shape input;
  int64_t classes;
  int64_t conv_fc_macs;  // multiply-adds of the convolutions and fc per sample
};

// torchvision.models.resnet18/34/50(): 11,689,512 / 21,797,672 / 25,557,032 parameters and
// 1.81 / 3.66 / 4.09 G multiply-adds ("GFLOPS" in its model table). CIFAR ResNet-20/56 with
// option B shortcuts: the paper's 0.27M / 0.85M are option A's 269,722 / 853,018, and the two
// projection shortcuts (1x1 conv + BN: 16 -> 32 and 32 -> 64) add 576 + 2,176 = 2,752.
const ResNetCase kCases[] = {
    {"resnet18.yaml", 11'689'512, {3, 224, 224}, 1000, 1'814'073'344},
    {"resnet34.yaml", 21'797'672, {3, 224, 224}, 1000, 3'663'761'408},
    {"resnet50.yaml", 25'557'032, {3, 224, 224}, 1000, 4'089'184'256},
    {"resnet20.yaml", 269'722 + 2'752, {3, 32, 32}, 10, 40'813'184},
    {"resnet56.yaml", 853'018 + 2'752, {3, 32, 32}, 10, 125'747'840},
};

TEST(ResNets, ParameterCountsAndShapesAreTorchvisions) {
  for (const ResNetCase& c : kCases) {
    SCOPED_TRACE(c.file);
    const Model m = Model::from_file(kModels + c.file, 1);
    EXPECT_EQ(m.parameter_count(), c.parameters);
    EXPECT_EQ(m.input_shape(), c.input);
    EXPECT_EQ(m.num_classes(), c.classes);
    EXPECT_EQ(m.output_shape(), (Shape{c.classes}));
    int64_t macs = 0;
    for (const LayerInfo& l : m.layer_infos())
      if (l.type == "conv2d" || l.type == "linear") macs += l.flops / 2;
    EXPECT_EQ(macs, c.conv_fc_macs);
  }
}

TEST(ResNets, StateNamesAndShapesFollowTorchvision) {
  Model m = Model::from_file(kModels + "resnet50.yaml", 1);
  std::map<std::string, Shape> shapes;
  for (const NamedTensor& t : m.state()) shapes[t.name] = t.tensor.shape();
  // torchvision's state_dict keys, e.g. layer1.0.downsample.0.weight.
  EXPECT_EQ(shapes.at("conv1.weight"), (Shape{64, 3, 7, 7}));
  EXPECT_EQ(shapes.at("layer1.0.downsample.0.weight"), (Shape{256, 64, 1, 1}));  // stage 1: 64 -> 256
  EXPECT_EQ(shapes.at("layer1.0.downsample.1.running_var"), (Shape{256}));
  EXPECT_EQ(shapes.at("layer2.0.conv2.weight"), (Shape{128, 128, 3, 3}));
  EXPECT_EQ(shapes.at("layer4.2.conv3.weight"), (Shape{2048, 512, 1, 1}));
  EXPECT_EQ(shapes.at("fc.weight"), (Shape{1000, 2048}));
  EXPECT_EQ(shapes.at("fc.bias"), (Shape{1000}));
  EXPECT_FALSE(shapes.count("conv1.bias"));
  EXPECT_FALSE(shapes.count("layer1.1.downsample.0.weight"));  // identity shortcut after the first block
  // v1.5: the stride is on the 3x3 conv, so layer2's first 1x1 still sees 56x56.
  std::map<std::string, LayerInfo> infos;
  for (const LayerInfo& l : m.layer_infos()) infos[l.name] = l;
  EXPECT_EQ(infos.at("layer2.0.conv1").output, (Shape{128, 56, 56}));
  EXPECT_EQ(infos.at("layer2.0.conv2").output, (Shape{128, 28, 28}));
  EXPECT_EQ(infos.at("layer4.2.relu").output, (Shape{2048, 7, 7}));
  EXPECT_EQ(infos.at("layer2.0.add").inputs, (std::vector<std::string>{"layer2.0.bn3", "layer2.0.downsample.1"}));
  EXPECT_FALSE(infos.at("layer2.0.add").reads_previous);
  EXPECT_EQ(infos.at("layer2.0.downsample.0").inputs, (std::vector<std::string>{"layer1.2.relu"}));
  EXPECT_TRUE(infos.at("layer2.0.conv1").reads_previous);
  EXPECT_TRUE(infos.at("conv1").reads_previous);  // the first layer reads the input by default
}

TEST(ResNets, ResNet50ForwardFlopsMatchTorchvision) {
  // torchvision: 4.09 G multiply-adds; Convoy counts 2 FLOPs per multiply-add and also counts
  // batch norm, ReLU, the adds and pooling, which add about 1%.
  const Model m = Model::from_file(kModels + "resnet50.yaml", 1);
  const double flops = static_cast<double>(m.forward_flops());
  EXPECT_NEAR(flops / 8.18e9, 1.0, 0.03) << flops;
  EXPECT_GT(flops, 2.0 * 4'089'184'256);
  // The per-layer figures are what the total sums.
  int64_t sum = 0, params = 0;
  for (const LayerInfo& l : m.layer_infos()) sum += l.flops, params += l.parameters;
  EXPECT_EQ(sum, m.forward_flops());
  EXPECT_EQ(params, m.parameter_count());
}

// Logits (2, classes) from a (2, C, H, W) batch on the CPU, finite.
void expect_forward(const std::string& file) {
  SCOPED_TRACE(file);
  Model m = Model::from_file(kModels + file, 1);
  const std::unique_ptr<Backend> cpu = make_cpu_backend({});
  m.to(*cpu, DType::f32);
  const Shape& in = m.input_shape();
  Tensor x = Tensor::zeros({2, in[0], in[1], in[2]});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::sin(0.001f * static_cast<float>(i));
  const Tensor y = m.forward(*cpu, x, StepInfo{});
  ASSERT_EQ(y.shape(), (Shape{2, m.num_classes()}));
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_TRUE(std::isfinite(y.data<float>()[i])) << i;
}

// One test each, to keep each one short on a small machine (ResNet-50: 2 x 8 GFLOPs).
TEST(ResNets, ResNet20RunsOnTheCpu) { expect_forward("resnet20.yaml"); }
TEST(ResNets, ResNet56RunsOnTheCpu) { expect_forward("resnet56.yaml"); }
TEST(ResNets, ResNet18RunsOnTheCpu) { expect_forward("resnet18.yaml"); }
TEST(ResNets, ResNet34RunsOnTheCpu) { expect_forward("resnet34.yaml"); }
TEST(ResNets, ResNet50RunsOnTheCpu) { expect_forward("resnet50.yaml"); }

}  // namespace
}  // namespace convoy
