// ONNX export and import (label `onnx`): every shipped model exports, passes onnx.checker
// (Debian's python3-onnx) and gives Convoy's logits in ONNX Runtime (npm's onnxruntime-node,
// tests/interchange/ort_run.js); a trained Fashion-MNIST model gives `convoy infer`'s top-1 on the
// whole test set; small ONNX files of each supported op import and agree with ONNX Runtime; an
// unsupported op is refused by name; Convoy -> ONNX -> Convoy keeps the logits; torch.onnx's
// export of a small ResNet imports and agrees with PyTorch. Skips name what is missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <regex>

#include "interchange/torch_fixture.h"
#include "run_command.h"
#include "temp_dir.h"
#include "engine/backends/backend.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/core/error.h"
#include "engine/graph/model.h"
#ifdef CONVOY_HAVE_ONNX
#include "engine/interchange/onnx_import.h"
#endif

namespace convoy {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::run_command;
using testing::TempDir;

const std::string kSource = CONVOY_SOURCE_DIR;
const std::string kData = "/usr/share/datasets/fashion-mnist";

CommandResult convoy(const std::string& args) { return run_command(std::string(CONVOY_BINARY) + " " + args + " 2>&1"); }

// A (N, C, H, W) batch of smooth values with both signs.
Tensor test_input(int64_t n, const Shape& sample) {
  Tensor x = Tensor::empty({n, sample[0], sample[1], sample[2]});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::sin(0.37f * static_cast<float>(i % 1013)) * 1.5f;
  return x;
}

void write_floats(const fs::path& path, const Tensor& t) {
  std::ofstream(path, std::ios::binary).write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
}

Tensor read_floats(const fs::path& path, Shape shape) {
  Tensor t = Tensor::empty(std::move(shape));
  std::ifstream in(path, std::ios::binary);
  in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
  EXPECT_EQ(in.gcount(), static_cast<std::streamsize>(t.nbytes())) << path;
  return t;
}

Tensor cpu_forward(Model& model, const Tensor& x) {
  const std::unique_ptr<Backend> cpu = make_cpu_backend({});
  model.to(*cpu, DType::f32);
  return model.forward(*cpu, x, StepInfo{});
}

class Onnx : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef CONVOY_HAVE_ONNX
    GTEST_SKIP() << "built without ONNX (CONVOY_ONNX=OFF, or libonnx-dev/libprotobuf-dev missing)";
#endif
  }
  // Empty when python3-onnx is there, else why not.
  std::string need_onnx_python() const {
    const CommandResult r = run_command(testing::torch_python() + " -c 'import onnx' 2>&1");
    return r.status == 0 ? "" : "python3-onnx is not installed (apt-get install python3-onnx)";
  }
  // ONNX Runtime's logits for `x`, or an empty tensor and a skip reason.
  Tensor ort_logits(const fs::path& onnx, const Tensor& x, int64_t classes, std::string& skip) const {
    write_floats(dir_ / "x.f32", x);
    const CommandResult r = run_command("node " + kSource + "/tests/interchange/ort_run.js logits " + onnx.string() + " " +
                                        (dir_ / "x.f32").string() + " " + std::to_string(x.dim(0)) + " " +
                                        std::to_string(x.dim(1)) + " " + std::to_string(x.dim(2)) + " " +
                                        std::to_string(x.dim(3)) + " " + (dir_ / "y.f32").string() + " 2>&1");
    if (r.status == 3 || r.status == 127) {
      skip = "node or onnxruntime-node is missing (bash scripts/install-onnxruntime-node.sh): " + r.output;
      return {};
    }
    EXPECT_EQ(r.status, 0) << r.output;
    return read_floats(dir_ / "y.f32", {x.dim(0), classes});
  }
  TempDir dir_{"convoy-onnx"};
};

TEST_F(Onnx, EveryShippedModelExportsPassesTheCheckerAndRunsInOrt) {
  if (const std::string why = need_onnx_python(); !why.empty()) GTEST_SKIP() << why;
  int models = 0;
  for (const auto& entry : fs::directory_iterator(kSource + "/models")) {
    if (entry.path().extension() != ".yaml") continue;
    ++models;
    const std::string name = entry.path().stem().string();
    SCOPED_TRACE(name);
    const fs::path onnx = dir_ / (name + ".onnx");
    CommandResult r = convoy("export --model " + entry.path().string() + " --seed 3 --format onnx -o " + onnx.string());
    ASSERT_EQ(r.status, 0) << r.output;
    r = run_command(testing::torch_python() + " " + kSource + "/tests/interchange/onnx_ops.py check " + onnx.string() + " 2>&1");
    ASSERT_EQ(r.status, 0) << r.output;  // onnx.checker.check_model(full_check=True)
    EXPECT_NE(r.output.find("\"opset\": [17]"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("\"input\": [\"batch\""), std::string::npos) << r.output;  // dynamic batch
    Model model = Model::from_file(entry.path().string(), 3);
    const Tensor x = test_input(2, model.input_shape());
    std::string skip;
    const Tensor ort = ort_logits(onnx, x, model.num_classes(), skip);
    if (!skip.empty()) GTEST_SKIP() << skip;
    const double err = testing::relative_error(ort, cpu_forward(model, x));
    EXPECT_LE(err, 1e-4) << name;
    std::cout << "[          ] " << name << ": ONNX Runtime vs Convoy logits, max relative error " << err << std::endl;
  }
  EXPECT_GE(models, 7);
}

// A LeNet-5 trained briefly on real Fashion-MNIST: its ONNX export in ONNX Runtime gives the top-1
// class `convoy infer` gives, image by image, over the whole test set (10,000 images).
TEST_F(Onnx, TrainedFashionMnistTop1AgreesWithConvoyInfer) {
  if (!fs::exists(kData + "/t10k-images-idx3-ubyte.gz")) GTEST_SKIP() << "Fashion-MNIST is not installed at " << kData;
  if (const std::string why = need_onnx_python(); !why.empty()) GTEST_SKIP() << why;
  CommandResult r = convoy("train --config " + kSource + "/configs/fashion_mnist.yaml --set name=fm --set output.dir=" +
                           dir_.path().string() + " --set dataset.train_limit=3000 --set dataset.test_limit=500 "
                           "--set epochs=1 --set batch_size=64 --set device=cpu");
  ASSERT_EQ(r.status, 0) << r.output;
  const fs::path ckpt = dir_ / "fm/best.safetensors", onnx = dir_ / "fm.onnx";
  r = convoy("export --model " + ckpt.string() + " -o " + onnx.string());
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_command(testing::torch_python() + " " + kSource + "/tests/interchange/onnx_ops.py check " + onnx.string() + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* key : {"class_names", "mean", "std", "preprocess"})
    EXPECT_NE(r.output.find(std::string("\"") + key + "\""), std::string::npos) << key << ": " << r.output;
  r = convoy("infer --model " + ckpt.string() + " --data fashion-mnist:test --device cpu --predictions " +
             (dir_ / "convoy.txt").string());
  ASSERT_EQ(r.status, 0) << r.output;
  const auto meta = read_safetensors(ckpt).metadata;
  const std::string mean = std::regex_replace(meta.at("mean"), std::regex("[\\[\\] ]"), "");
  const std::string std_ = std::regex_replace(meta.at("std"), std::regex("[\\[\\] ]"), "");
  r = run_command("node " + kSource + "/tests/interchange/ort_run.js top1 " + onnx.string() + " " + kData +
                  "/t10k-images-idx3-ubyte.gz " + mean + " " + std_ + " 0 " + (dir_ / "ort.txt").string() + " 2>&1");
  if (r.status == 3 || r.status == 127) GTEST_SKIP() << "node or onnxruntime-node is missing: " << r.output;
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream a(dir_ / "convoy.txt"), b(dir_ / "ort.txt");
  std::string x, y;
  int64_t n = 0, differ = 0;
  while (std::getline(a, x) && std::getline(b, y)) ++n, differ += x != y;
  EXPECT_EQ(n, 10000);
  EXPECT_EQ(differ, 0) << differ << " of " << n << " images get another top-1 class in ONNX Runtime";
}

#ifdef CONVOY_HAVE_ONNX
// The imported model, built and loaded as `convoy import` writes it.
Model import_and_build(const fs::path& onnx) {
  const ImportedModel imported = import_onnx(onnx, "imported");
  Model m = Model::from_yaml(imported.yaml, onnx.string(), 0);
  m.load_state(imported.tensors, onnx.string());
  return m;
}

TEST_F(Onnx, EachSupportedOpImportsAndAgreesWithOrt) {
  if (const std::string why = need_onnx_python(); !why.empty()) GTEST_SKIP() << why;
  const CommandResult made = run_command(testing::torch_python() + " " + kSource + "/tests/interchange/onnx_ops.py " +
                                         dir_.path().string() + " 2>&1");
  ASSERT_EQ(made.status, 0) << made.output;
  int cases = 0;
  const std::vector<const char*> names = {
      "conv", "conv_dilated", "batchnorm", "relu", "leaky_relu", "gelu", "maxpool", "avgpool", "global_avg_pool",
      "global_max_pool", "gemm", "matmul_add", "add", "concat", "dropout_identity", "sigmoid", "silu", "hardsigmoid",
      "hardswish", "relu6", "clip_relu", "reduce_mean", "reduce_mean_flat", "pad_avgpool", "view_flatten",
      "maxpool_ceil", "se_mul"};
  for (const char* name : names) {
    SCOPED_TRACE(name);
    const fs::path onnx = dir_ / (std::string(name) + ".onnx");
    Model m = import_and_build(onnx);
    const Tensor x = test_input(3, m.input_shape());
    std::string skip;
    const Tensor ort = ort_logits(onnx, x, m.num_classes(), skip);
    if (!skip.empty()) GTEST_SKIP() << skip;
    EXPECT_LE(testing::relative_error(cpu_forward(m, x), ort), 1e-5);
    ++cases;
  }
  EXPECT_EQ(cases, static_cast<int>(names.size()));
  try {
    import_onnx(dir_ / "unsupported.onnx", "x");
    ADD_FAILURE() << "Tanh was imported";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("node 'squash' (op Tanh)"), std::string::npos) << e.what();
  }
  const CommandResult r = convoy("import " + (dir_ / "unsupported.onnx").string() + " -o " + (dir_ / "u.yaml").string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("node 'squash' (op Tanh): this op is not supported"), std::string::npos) << r.output;
}

// The patterns fold into one layer each: SiLU's Sigmoid and Mul, a flatten's shape arithmetic, a
// Pad of zeros (nothing); what Convoy's layers cannot honour is refused with the node, op and reason.
TEST_F(Onnx, FoldsPatternsAndRefusesWhatTheLayersCannotHonour) {
  if (const std::string why = need_onnx_python(); !why.empty()) GTEST_SKIP() << why;
  const CommandResult made = run_command(testing::torch_python() + " " + kSource + "/tests/interchange/onnx_ops.py " +
                                         dir_.path().string() + " 2>&1");
  ASSERT_EQ(made.status, 0) << made.output;
  const std::vector<std::pair<const char*, std::vector<const char*>>> folded = {
      {"silu", {"{name: act, type: silu}"}},
      {"relu6", {"type: relu6"}},
      {"clip_relu", {"type: relu}"}},
      {"view_flatten", {"{name: reshape, type: flatten}"}},
      {"pad_avgpool", {"{name: pool, type: avgpool2d, kernel: 2, stride: 2}"}},
      {"reduce_mean", {"{name: mean, type: global_avg_pool}"}},
      {"reduce_mean_flat", {"type: global_avg_pool", "{name: mean_flat, type: flatten}"}},
      {"se_mul", {"{name: se, type: mul, inputs: [scale_act, spread]}"}}};
  for (const auto& [name, parts] : folded) {
    const std::string yaml = import_onnx(dir_ / (std::string(name) + ".onnx"), "x").yaml;
    for (const char* part : parts) EXPECT_NE(yaml.find(part), std::string::npos) << name << ": " << part << " in " << yaml;
    EXPECT_EQ(yaml.find("type: sigmoid"), std::string::npos) << yaml;
  }
  const std::vector<std::pair<const char*, const char*>> refused = {
      {"refused_ceil", "node 'pool' (op MaxPool): ceil_mode 1 adds a window at the bottom or right edge of its 6x6 input"},
      {"refused_clip", "node 'clip' (op Clip): bounds (-1, 1) are not supported"},
      {"refused_hardsigmoid", "node 'hsig' (op HardSigmoid): alpha 0.2 and beta 0.5 are not supported"},
      {"refused_pad", "node 'pad' (op Pad): pads [0, 0, 1, 1, 0, 0, 1, 1] are not supported"},
      {"refused_reduce_mean", "node 'mean' (op ReduceMean): axes [1] are not supported"},
      {"refused_mul", "node 'scale' (op Mul): only a product of two tensors is supported"}};
  for (const auto& [name, message] : refused) {
    const CommandResult r =
        convoy("import " + (dir_ / (std::string(name) + ".onnx")).string() + " -o " + (dir_ / "r.yaml").string());
    EXPECT_EQ(r.status, 1) << name << ": " << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << name << ": " << r.output;
  }
}

// Files that are not ONNX, cut short, or hold what Convoy cannot honour: InputErrors naming the file.
TEST_F(Onnx, MalformedFilesAreInputErrorsNamingTheFile) {
  if (const std::string why = need_onnx_python(); !why.empty()) GTEST_SKIP() << why;
  const CommandResult made = run_command(testing::torch_python() + " " + kSource + "/tests/interchange/onnx_ops.py " +
                                         dir_.path().string() + " 2>&1");
  ASSERT_EQ(made.status, 0) << made.output;
  std::ifstream in(dir_ / "conv.onnx", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  testing::write_text_file(dir_ / "garbage.onnx", "this is not a protobuf \xff\xff\xff\xff");
  testing::write_text_file(dir_ / "cut.onnx", bytes.substr(0, bytes.size() / 2));
  for (const char* name : {"garbage.onnx", "cut.onnx", "absent.onnx"}) {
    try {
      import_onnx(dir_ / name, "x");
      ADD_FAILURE() << name << " was imported";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
  // Asymmetric padding (as TensorFlow's SAME makes) has no Convoy equivalent.
  const CommandResult r = run_command(testing::torch_python() + " -c \"import onnx,sys; m=onnx.load(sys.argv[1]); "
                                      "a=[a for a in m.graph.node[0].attribute if a.name=='pads'][0]; a.ints[:]=[1,1,0,0]; "
                                      "onnx.save(m, sys.argv[2])\" " + (dir_ / "conv.onnx").string() + " " +
                                      (dir_ / "asym.onnx").string() + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  try {
    import_onnx(dir_ / "asym.onnx", "x");
    ADD_FAILURE() << "asymmetric pads were imported";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("node 'conv' (op Conv): asymmetric pads"), std::string::npos) << e.what();
  }
}

// Convoy -> ONNX -> Convoy: the same names, weights and logits (ResNet-20 and a net of every
// other layer type; gelu goes out as its erf formula and silu as Sigmoid and Mul, and each comes
// back as one layer).
TEST_F(Onnx, RoundTripKeepsTheLogits) {
  testing::write_text_file(dir_ / "all.yaml", R"(name: all_layers
input: [3, 12, 12]
layers:
  - {name: stem.conv, type: conv2d, out_channels: 8, kernel: 3, padding: 1, dilation: 1}
  - {name: stem.bn, type: batchnorm2d, eps: 0.001}
  - {name: stem.act, type: leaky_relu, negative_slope: 0.1}
  - {name: a, type: conv2d, out_channels: 8, kernel: 3, padding: 2, dilation: 2, groups: 4}
  - {name: b, type: gelu}
  - {name: sum, type: add, inputs: [b, stem.act]}
  - {name: pool, type: avgpool2d, kernel: 3, stride: 2, padding: 1}
  - {name: m, type: maxpool2d, kernel: 2, inputs: [stem.act]}
  - {name: m2, type: avgpool2d, kernel: 1, stride: 2, inputs: [m]}
  - {name: cat, type: concat, inputs: [pool, m]}
  - {name: r, type: relu}
  - {name: drop, type: dropout, p: 0.3}
  - {name: hsw, type: hardswish}
  - {name: si, type: silu}
  - {name: r6, type: relu6}
  - {name: hsig, type: hardsigmoid}
  - {name: sg, type: sigmoid}
  - {name: sq, type: global_avg_pool}
  - {name: se, type: mul, inputs: [sg, sq]}
  - {name: sqf, type: flatten, inputs: [sq]}
  - {name: se2, type: mul, inputs: [sqf, se]}
  - {name: g1, type: global_max_pool}
  - {name: fc1, type: linear, out_features: 6}
  - {name: flat, type: flatten}
  - {name: fc2, type: linear, out_features: 4, bias: false}
)");
  for (const std::string& model : {(dir_ / "all.yaml").string(), kSource + "/models/resnet20.yaml"}) {
    SCOPED_TRACE(model);
    const fs::path onnx = dir_ / "rt.onnx", yaml = dir_ / "rt.yaml", weights = dir_ / "rt.safetensors";
    CommandResult r = convoy("export --model " + model + " --seed 4 -o " + onnx.string());
    ASSERT_EQ(r.status, 0) << r.output;
    r = convoy("import " + onnx.string() + " -o " + yaml.string() + " --weights " + weights.string());
    ASSERT_EQ(r.status, 0) << r.output;
    Model original = Model::from_file(model, 4);
    std::vector<std::string> types_there, types_back;
    for (const LayerInfo& l : original.layer_infos()) types_there.push_back(l.type);
    Model back = Model::from_file(yaml.string(), 0);
    back.load_state(read_safetensors(weights).tensors, weights.string());
    std::vector<std::string> a, b;
    for (const NamedTensor& t : original.state()) a.push_back(t.name);
    for (const NamedTensor& t : back.state()) b.push_back(t.name);
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    EXPECT_EQ(a, b);
    for (const LayerInfo& l : back.layer_infos()) types_back.push_back(l.type);
    for (const std::string& type : types_there)  // every type comes back (linear may gain a flatten)
      EXPECT_NE(std::find(types_back.begin(), types_back.end(), type), types_back.end()) << type;
    const Tensor x = test_input(2, original.input_shape());
    const Tensor y = cpu_forward(original, x);
    EXPECT_LE(testing::relative_error(cpu_forward(back, x), y), 1e-6);
    // The export of every layer type passes the checker and runs in ONNX Runtime too.
    if (!need_onnx_python().empty()) continue;
    r = run_command(testing::torch_python() + " " + kSource + "/tests/interchange/onnx_ops.py check " + onnx.string() + " 2>&1");
    EXPECT_EQ(r.status, 0) << r.output;
    std::string skip;
    const Tensor ort = ort_logits(onnx, x, original.num_classes(), skip);
    if (skip.empty()) {
      EXPECT_LE(testing::relative_error(ort, y), 1e-4);
    }
  }
}

// torch.onnx (Debian's torch 1.13, opset 17; batch norm folded into the convolutions) of a small
// torchvision-style ResNet with a GELU: imports and gives PyTorch's float64 logits.
TEST_F(Onnx, ImportsTorchExportAndAgreesWithTorch) {
  if (const std::string why = testing::run_torch_models("onnx", dir_.path()); !why.empty()) GTEST_SKIP() << why;
  const CommandResult r = convoy("import " + (dir_ / "torch.onnx").string() + " -o " + (dir_ / "t.yaml").string());
  ASSERT_EQ(r.status, 0) << r.output;
  // torch's module scopes name the layers as its state dict does; GELU's erf formula is one layer.
  const std::string yaml = Model::read_file((dir_ / "t.yaml").string());
  for (const char* part : {"{name: layer2.0.downsample.0, type: conv2d", "{name: relu, type: gelu}", "{name: fc, type: linear"})
    EXPECT_NE(yaml.find(part), std::string::npos) << part << " in " << yaml;
  Model m = Model::from_file((dir_ / "t.yaml").string(), 0);
  m.load_state(read_safetensors(dir_ / "t.safetensors").tensors, "t.safetensors");
  const SafetensorsFile golden = read_safetensors(dir_ / "golden.safetensors");
  EXPECT_LE(testing::relative_error(cpu_forward(m, golden.at("input")), golden.at("logits")), 1e-4);
}

// torch.onnx's export of the mobile families' patterns (ReLU6, Hardswish, SiLU, Hardsigmoid,
// Sigmoid, nn.AvgPool2d's Pad of zeros, ceil_mode pooling, x.mean((2, 3)), x.view(x.size(0), -1)):
// each imports as its layer, and the logits agree with PyTorch's float64 ones.
TEST_F(Onnx, ImportsTorchMobilePatternsAndAgreesWithTorch) {
  if (const std::string why = testing::run_torch_models("mobile", dir_.path()); !why.empty()) GTEST_SKIP() << why;
  const CommandResult r = convoy("import " + (dir_ / "torch.onnx").string() + " -o " + (dir_ / "m.yaml").string());
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string yaml = Model::read_file((dir_ / "m.yaml").string());
  for (const char* part : {"{name: act1, type: relu6}", "{name: act2, type: hardswish}", "{name: act3, type: silu}",
                           "{name: pool, type: avgpool2d, kernel: 2, stride: 2}", "{name: act4, type: hardsigmoid}",
                           "{name: act5, type: sigmoid}", "{name: mpool, type: maxpool2d, kernel: 3, stride: 2}",
                           "type: global_avg_pool", "type: flatten", "{name: fc_flat, type: linear"})
    EXPECT_NE(yaml.find(part), std::string::npos) << part << " in " << yaml;
  Model m = Model::from_file((dir_ / "m.yaml").string(), 0);
  m.load_state(read_safetensors(dir_ / "m.safetensors").tensors, "m.safetensors");
  const SafetensorsFile golden = read_safetensors(dir_ / "golden.safetensors");
  EXPECT_LE(testing::relative_error(cpu_forward(m, golden.at("input")), golden.at("logits")), 1e-4);
}

// torchvision's ResNet-18 and ResNet-50 (torchvision itself where installed, as on the GPU
// machine; else its module tree rebuilt in torch.nn) through torch.onnx: they import with
// torchvision's layer names and give PyTorch's logits.
// The shipped model's parameter count once torch.onnx has folded each batch norm (2C
// parameters) into its convolution's new bias (C).
int64_t parameters_with_batch_norms_folded(const std::string& arch) {
  const Model shipped = Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/" + arch + ".yaml", 0);
  int64_t bn_channels = 0;
  for (const LayerInfo& l : shipped.layer_infos())
    if (l.type == "batchnorm2d") bn_channels += l.parameters / 2;
  return shipped.parameter_count() - bn_channels;
}

class OnnxTorchvision : public Onnx, public ::testing::WithParamInterface<const char*> {};

TEST_P(OnnxTorchvision, ImportsTheExportAndAgreesWithTorch) {
  const std::string arch = GetParam();
  const std::string why = testing::run_torch_models(arch, dir_.path(), "onnx");
  if (!why.empty()) GTEST_SKIP() << why;
  const CommandResult r =
      convoy("import " + (dir_ / (arch + ".onnx")).string() + " -o " + (dir_ / "net.yaml").string());
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string yaml = Model::read_file((dir_ / "net.yaml").string());
  for (const char* part : {"{name: layer4.1.conv2, type: conv2d", "{name: layer3.0.downsample.0, type: conv2d", "{name: fc, type: linear"})
    EXPECT_NE(yaml.find(part), std::string::npos) << part << " in " << yaml;
  Model m = Model::from_file((dir_ / "net.yaml").string(), 0);
  EXPECT_EQ(m.parameter_count(), parameters_with_batch_norms_folded(arch));
  m.load_state(read_safetensors(dir_ / "net.safetensors").tensors, "net.safetensors");
  const SafetensorsFile golden = read_safetensors(dir_ / "golden.safetensors");
  EXPECT_LE(testing::relative_error(cpu_forward(m, golden.at("input")), golden.at("logits")), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(ResNets, OnnxTorchvision, ::testing::Values("resnet18", "resnet50"));

// torchvision 0.14's own models (Debian's python3-torchvision, random weights) through torch.onnx
// (ReLU6 as Clip, batch norm folded into the convolutions where one precedes it, equal weights
// shared through Identity nodes, DenseNet's one-tensor Concat): each imports with torchvision's
// layer names and gives PyTorch's logits.
struct TorchvisionCase {
  const char* arch;
  const char* layer;  // a line the imported YAML holds
};
void PrintTo(const TorchvisionCase& c, std::ostream* os) { *os << c.arch; }

class OnnxTorchvisionModels : public Onnx, public ::testing::WithParamInterface<TorchvisionCase> {};

TEST_P(OnnxTorchvisionModels, ImportsTheExportAndAgreesWithTorch) {
  const TorchvisionCase c = GetParam();
  const std::string arch = c.arch;
  if (const std::string why = testing::run_torch_models(arch, dir_.path(), "onnx"); !why.empty()) GTEST_SKIP() << why;
  const CommandResult r = convoy("import " + (dir_ / (arch + ".onnx")).string() + " -o " + (dir_ / "net.yaml").string());
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string yaml = Model::read_file((dir_ / "net.yaml").string());
  EXPECT_NE(yaml.find(c.layer), std::string::npos) << c.layer << " in " << yaml;
  Model m = Model::from_file((dir_ / "net.yaml").string(), 0);
  // The shipped YAML of the same architecture has torchvision's parameters (batch norms folded here).
  if (fs::exists(kSource + "/models/" + arch + ".yaml"))
    EXPECT_EQ(m.parameter_count(), parameters_with_batch_norms_folded(arch));
  m.load_state(read_safetensors(dir_ / "net.safetensors").tensors, "net.safetensors");
  const SafetensorsFile golden = read_safetensors(dir_ / "golden.safetensors");
  const double err = testing::relative_error(cpu_forward(m, golden.at("input")), golden.at("logits"));
  EXPECT_LE(err, 1e-4);
  std::cout << "[          ] " << arch << ": Convoy vs PyTorch (float64) logits, max relative error " << err << std::endl;
}

INSTANTIATE_TEST_SUITE_P(
    Torchvision, OnnxTorchvisionModels,
    ::testing::Values(TorchvisionCase{"mobilenet_v2", "{name: features.17.conv.1.0, type: conv2d"},
                      TorchvisionCase{"vgg11_bn", "{name: classifier.6, type: linear"},
                      TorchvisionCase{"densenet121", "{name: features.denseblock4.denselayer16.conv2, type: conv2d"},
                      // Squeeze-and-excitation: its channel-wise Mul is a mul layer.
                      TorchvisionCase{"mobilenet_v3_small", ", type: mul, inputs: ["},
                      TorchvisionCase{"efficientnet_b0", "{name: features.7.0.block.3.0, type: conv2d"},
                      TorchvisionCase{"regnet_y_400mf", "{name: trunk_output.block4.block4-0.f.b.0, type: conv2d"}),
    [](const auto& info) { return std::string(info.param.arch); });
#endif

}  // namespace
}  // namespace convoy
