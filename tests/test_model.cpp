// Model YAML: DAG construction, shape inference and its errors, the shipped models.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/backends/backend.h"
#include "engine/core/error.h"
#include "engine/graph/model.h"

namespace convoy {
namespace {

std::string error_of(const std::string& yaml) {
  try {
    Model::from_yaml(yaml, "m.yaml", 1);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// A model asks its backend before it runs: the CPU path runs f32 in nchw, so fmnet in f32
// needs nothing it lacks, while bf16 or channels-last name the convolution (and more).
TEST(Model, UnsupportedOpsAreFoundBeforeRunning) {
  Model fm = Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/fmnet.yaml", 1);
  const std::unique_ptr<Backend> cpu = make_cpu_backend({});
  EXPECT_TRUE(fm.unsupported_ops(cpu->ops(), DType::f32, Layout::nchw).empty());
  const auto contains = [](const std::vector<OpKind>& ops, OpKind op) {
    return std::find(ops.begin(), ops.end(), op) != ops.end();
  };
  const std::vector<OpKind> bf16 = fm.unsupported_ops(cpu->ops(), DType::bf16, Layout::nchw);
  EXPECT_TRUE(contains(bf16, OpKind::conv2d_forward));
  EXPECT_TRUE(contains(bf16, OpKind::batchnorm_backward));
  EXPECT_TRUE(contains(bf16, OpKind::linear_forward));
  const std::vector<OpKind> nhwc = fm.unsupported_ops(cpu->ops(), DType::f32, Layout::nhwc);
  EXPECT_TRUE(contains(nhwc, OpKind::conv2d_backward_weights));
  EXPECT_FALSE(contains(nhwc, OpKind::cast));  // the CPU converts layouts, it just computes in nchw
}

TEST(Model, ShippedModelsBuildWithTheirDocumentedShapes) {
  Model fm = Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/fmnet.yaml", 1);
  EXPECT_EQ(fm.num_classes(), 10);
  const std::string s = fm.summary();
  EXPECT_NE(s.find("b1_pool (maxpool2d) -> (64, 14, 14)"), std::string::npos) << s;
  EXPECT_NE(s.find("b2_pool (maxpool2d) -> (128, 7, 7)"), std::string::npos) << s;
  EXPECT_NE(s.find("b3_pool (maxpool2d) -> (256, 3, 3)"), std::string::npos) << s;
  EXPECT_NE(s.find("pool (global_max_pool) -> (256, 1, 1)"), std::string::npos) << s;
  // fc is 256 -> 10 without bias.
  bool found_fc = false;
  for (auto& [name, p] : fm.parameters()) {
    EXPECT_NE(name, "fc.bias");
    if (name == "fc.weight") {
      found_fc = true;
      EXPECT_EQ(p->value.shape(), (Shape{10, 256}));
    }
  }
  EXPECT_TRUE(found_fc);
  Model le = Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/lenet5.yaml", 1);
  EXPECT_EQ(le.num_classes(), 10);
  EXPECT_GT(le.forward_flops(), 1'000'000);
}

// input_shape_of reads the input without building layers, and checks it as from_yaml does.
TEST(Model, InputShapeOfReadsTheYamlWithoutBuilding) {
  const std::string path = std::string(CONVOY_SOURCE_DIR) + "/models/fmnet.yaml";
  EXPECT_EQ(Model::input_shape_of(Model::read_file(path), path), Model::from_file(path, 1).input_shape());
  EXPECT_THROW(Model::input_shape_of("name: m\ninput: [1, 0, 28]\nlayers: []\n", "m.yaml"), InputError);
  EXPECT_THROW(Model::input_shape_of("name: m\nlayers: []\n", "m.yaml"), InputError);
}

TEST(Model, StateNamesFollowPyTorch) {
  Model m = Model::from_yaml(R"(
name: t
input: [1, 8, 8]
layers:
  - {name: conv, type: conv2d, out_channels: 4, kernel: 3}
  - {name: bn, type: batchnorm2d}
  - {type: global_avg_pool}
  - {name: fc, type: linear, out_features: 3}
)", "t.yaml", 1);
  std::vector<std::string> names;
  for (const auto& t : m.state()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv.weight", "conv.bias", "bn.weight", "bn.bias", "fc.weight",
                                             "fc.bias", "bn.running_mean", "bn.running_var"}));
}

// PyTorch's nested module names (layer1.0.conv1) are layer names, so state-dict names are
// torchvision's keys; names with empty parts or blanks are refused, naming the layer.
TEST(Model, DottedNamesAreStateDictNames) {
  const std::string yaml = R"(
name: t
input: [1, 8, 8]
layers:
  - {name: layer1.0.conv1, type: conv2d, out_channels: 4, kernel: 3, bias: false}
  - {name: layer1.0.downsample.1, type: batchnorm2d}
  - {name: layer1.0.relu, type: relu}
  - {name: layer1.0.add, type: add, inputs: [layer1.0.relu, layer1.0.conv1]}
  - {type: global_avg_pool}
  - {name: head.fc, type: linear, out_features: 3}
)";
  Model m = Model::from_yaml(yaml, "t.yaml", 1);
  std::vector<std::string> names;
  for (const auto& t : m.state()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"layer1.0.conv1.weight", "layer1.0.downsample.1.weight",
                                             "layer1.0.downsample.1.bias", "head.fc.weight", "head.fc.bias",
                                             "layer1.0.downsample.1.running_mean",
                                             "layer1.0.downsample.1.running_var"}));
  // The names survive a checkpoint: another seed's model loads this one's state by name.
  Model other = Model::from_yaml(yaml, "t.yaml", 2);
  ASSERT_NE(other.state()[0].tensor.to_floats(), m.state()[0].tensor.to_floats());
  other.load_state(m.state(), "t.safetensors");
  for (size_t i = 0; i < names.size(); ++i)
    EXPECT_EQ(other.state()[i].tensor.to_floats(), m.state()[i].tensor.to_floats()) << names[i];
  for (const char* bad : {".a", "a.", "a..b", "a b", "a,b"}) {
    const std::string e = error_of(std::string("name: x\ninput: [1, 8, 8]\nlayers:\n  - {name: '") + bad +
                                   "', type: flatten}\n");
    EXPECT_NE(e.find(std::string("'") + bad + "'"), std::string::npos) << bad << ": " << e;
  }
}

TEST(Model, SameSeedSameWeightsOtherSeedOtherWeights) {
  const std::string path = std::string(CONVOY_SOURCE_DIR) + "/models/lenet5.yaml";
  Model a = Model::from_file(path, 5), b = Model::from_file(path, 5), c = Model::from_file(path, 6);
  EXPECT_EQ(a.state()[0].tensor.to_floats(), b.state()[0].tensor.to_floats());
  EXPECT_NE(a.state()[0].tensor.to_floats(), c.state()[0].tensor.to_floats());
}

TEST(Model, ShapeMismatchNamesTheLayerAndBothShapes) {
  const std::string e = error_of(R"(
name: bad
input: [1, 8, 8]
layers:
  - {name: a, type: conv2d, out_channels: 4, kernel: 3}
  - {name: b, type: conv2d, out_channels: 8, kernel: 3, inputs: [input]}
  - {name: sum, type: add, inputs: [a, b]}
  - {type: flatten}
  - {type: linear, out_features: 2}
)");
  EXPECT_NE(e.find("m.yaml:7"), std::string::npos) << e;
  EXPECT_NE(e.find("layer 'sum' (add)"), std::string::npos) << e;
  EXPECT_NE(e.find("(4, 6, 6)"), std::string::npos) << e;
  EXPECT_NE(e.find("(8, 6, 6)"), std::string::npos) << e;
}

// mul scales each channel of one input by the other: two images, or a factor of other channels,
// are refused naming the layer and both shapes.
TEST(Model, MulWithoutAPerChannelFactorNamesBothShapes) {
  const char* head = "name: x\ninput: [4, 8, 8]\nlayers:\n  - {name: g, type: global_avg_pool}\n"
                     "  - {name: c, type: conv2d, out_channels: 3, kernel: 1}\n";
  std::string e = error_of(std::string(head) + "  - {name: m, type: mul, inputs: [input, input]}\n");
  EXPECT_NE(e.find("layer 'm' (mul): multiplies (C, H, W) by one number per channel, (C, 1, 1) or (C), in either "
                   "order; got (4, 8, 8) and (4, 8, 8)"),
            std::string::npos)
      << e;
  e = error_of(std::string(head) + "  - {name: m, type: mul, inputs: [c, input]}\n");
  EXPECT_NE(e.find("got (3, 1, 1) and (4, 8, 8)"), std::string::npos) << e;
  e = error_of(std::string(head) + "  - {name: m, type: mul, inputs: [g, input]}\n  - {type: global_avg_pool}\n"
                                    "  - {type: flatten}\n");
  EXPECT_EQ(e, "");  // the factor first is as good
}

TEST(Model, LinearOnImagesSuggestsFlatten) {
  const std::string e = error_of("name: x\ninput: [1, 8, 8]\nlayers:\n  - {type: linear, out_features: 2}\n");
  EXPECT_NE(e.find("add a flatten or global pooling layer"), std::string::npos) << e;
}

// A window that overhangs the input by less than a stride has no output position; C++'s
// division toward zero once counted one (input 2, kernel 3, stride 2).
TEST(Model, AWindowThatOverhangsTheInputIsAnError) {
  std::string e = error_of("name: x\ninput: [1, 2, 2]\nlayers:\n  - {type: conv2d, out_channels: 2, kernel: 3, stride: 2}\n");
  EXPECT_NE(e.find("the kernel does not fit the input (1, 2, 2)"), std::string::npos) << e;
  e = error_of("name: x\ninput: [1, 2, 2]\nlayers:\n  - {type: maxpool2d, kernel: 3, stride: 2}\n");
  EXPECT_NE(e.find("the window does not fit the input (1, 2, 2)"), std::string::npos) << e;
}

TEST(Model, StructuralErrors) {
  EXPECT_NE(error_of("name: x\ninput: [1, 8, 8]\nlayers:\n  - {type: conv3d}\n").find("unknown layer type 'conv3d'"),
            std::string::npos);
  EXPECT_NE(error_of("name: x\ninput: [1, 8, 8]\nlayers:\n  - {type: relu, inputs: [later]}\n  - {name: later, type: relu}\n")
                .find("'later' is not an earlier layer"),
            std::string::npos);
  EXPECT_NE(error_of("name: x\ninput: [1, 8, 8]\nlayers:\n  - {name: a, type: relu}\n  - {name: a, type: relu}\n")
                .find("'a' is already taken"),
            std::string::npos);
  EXPECT_NE(error_of("name: x\ninput: [1, 8, 8]\nlayers:\n  - {type: conv2d, out_channels: 2, kernel: 3, strde: 2}\n")
                .find("strde: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of("name: x\ninput: [1, 8, 8]\nlayers:\n  - {type: conv2d, out_channels: 2, kernel: 9}\n")
                .find("does not fit"),
            std::string::npos);
  EXPECT_NE(error_of("name: x\ninput: [1, 8, 8]\nclasses: 3\nlayers:\n  - {type: flatten}\n  - {type: linear, out_features: 2}\n")
                .find("3 classes, but the output layer gives (2,)"),
            std::string::npos);
  EXPECT_NE(error_of("name: x\ninput: [1, 8, 8]\nlayers:\n  - {type: relu}\n").find("per-sample class scores"),
            std::string::npos);
  EXPECT_NE(error_of("name: x\nlayers:\n  - {type: relu}\n").find("input: missing"), std::string::npos);
  EXPECT_NE(error_of("name: x\ninput: [1, 8, 8]\nlayers: []\n").find("non-empty list"), std::string::npos);
  EXPECT_NE(error_of("name: x\ninput: [3, 8, 8]\nlayers:\n  - {type: conv2d, out_channels: 4, kernel: 1, groups: 2}\n")
                .find("groups 2 does not divide the 3 input channels"),
            std::string::npos);
}

// The upsample and softmax layers' keys: each mistake is one error naming the file, line and key
// (or the layer, for what only the shapes show), and the shapes come out as PyTorch's.
TEST(Model, UpsampleAndSoftmaxKeysAreCheckedByName) {
  auto with = [](const std::string& layer) {
    return "name: m\ninput: [3, 4, 4]\nlayers:\n  - " + layer +
           "\n  - {name: g, type: global_avg_pool}\n  - {name: f, type: flatten}\n";
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{name: u, type: upsample}",
       "m.yaml:4: layers[0] (u).scale: missing (expected scale: N or [sh, sw], or size: [H, W])"},
      {"{name: u, type: upsample, scale: 2, size: [4, 4]}", "(u).size: give scale or size, not both"},
      {"{name: u, type: upsample, mode: cubic, scale: 2}",
       "(u).mode: 'cubic' is not a mode (expected nearest or bilinear)"},
      {"{name: u, type: upsample, scale: 0}", "(u).scale: 0 is out of range (expected 1 ... 64)"},
      {"{name: u, type: upsample, scale: 1.5}", "(u).scale: expected an integer or a list of 2 integers"},
      {"{name: u, type: upsample, scale: 2, align_corners: true}", "(u).align_corners: unknown key"},
      {"{name: u, type: upsample, size: [5, 4]}",
       "layer 'u' (upsample): nearest upsampling needs an output size that is a whole multiple of the input's "
       "(height 4 -> 5"},
      {"{name: u, type: softmax, dim: 2}", "(u).dim: unknown key"}};
  for (const auto& [layer, message] : cases) {
    const std::string error = error_of(with(layer));
    EXPECT_NE(error.find(message), std::string::npos) << layer << ": " << error;
  }
  Model m = Model::from_yaml(
      with("{name: u, type: upsample, mode: bilinear, size: [5, 7]}\n  - {name: s, type: softmax}"), "m.yaml", 1);
  EXPECT_EQ(m.graph_nodes()[0].shape, (Shape{3, 5, 7}));
  EXPECT_EQ(m.graph_nodes()[1].shape, (Shape{3, 5, 7}));
  EXPECT_EQ(Model::from_yaml(with("{name: u, type: upsample, scale: [2, 3]}"), "m.yaml", 1).graph_nodes()[0].shape,
            (Shape{3, 8, 12}));
}

TEST(Model, WrongInputShapeAtRunTimeIsAnError) {
  Model m = Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/lenet5.yaml", 1);
  auto backend = make_cpu_backend({});
  m.to(*backend, DType::f32);
  EXPECT_THROW(m.forward(*backend, Tensor::zeros({2, 3, 28, 28}), StepInfo{}), InputError);
}

}  // namespace
}  // namespace convoy
