// ONNX export and import of the upsample and softmax layers (label `onnx`): torch.onnx's export of
// nn.Upsample, F.interpolate (scales, and sizes computed from Shape, Slice and Concat) and softmax
// imports and agrees with PyTorch's float64 logits; Convoy -> ONNX -> Convoy keeps the logits (and
// ONNX Runtime agrees where it is installed); small onnx.helper files of each pattern import and
// agree with ONNX Runtime; what the layers cannot honour is refused naming node, op and reason.
// Skips name what is missing.
#include <gtest/gtest.h>

#include <fstream>

#include "interchange/torch_fixture.h"
#include "run_command.h"
#include "temp_dir.h"
#include "engine/backends/backend.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/graph/model.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::run_command;

const std::string kSource = CONVOY_SOURCE_DIR;

CommandResult convoy(const std::string& args) { return run_command(std::string(CONVOY_BINARY) + " " + args + " 2>&1"); }

Tensor cpu_forward(Model& model, const Tensor& x) {
  const std::unique_ptr<Backend> cpu = make_cpu_backend({});
  model.to(*cpu, DType::f32);
  return model.forward(*cpu, x, StepInfo{});
}

// A (N, C, H, W) batch of smooth values with both signs.
Tensor test_input(int64_t n, const Shape& sample) {
  Tensor x = Tensor::empty({n, sample[0], sample[1], sample[2]});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::sin(0.37f * static_cast<float>(i % 1013)) * 1.5f;
  return x;
}

class OnnxResize : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef CONVOY_HAVE_ONNX
    GTEST_SKIP() << "built without ONNX (CONVOY_ONNX=OFF, or libonnx-dev/libprotobuf-dev missing)";
#endif
  }
  // The imported model of `onnx` with its weights.
  Model import(const fs::path& onnx, const std::string& stem, std::string* yaml_text = nullptr) {
    const CommandResult r = convoy("import " + onnx.string() + " -o " + (dir_ / (stem + ".yaml")).string());
    EXPECT_EQ(r.status, 0) << r.output;
    if (yaml_text) *yaml_text = Model::read_file((dir_ / (stem + ".yaml")).string());
    Model m = Model::from_file((dir_ / (stem + ".yaml")).string(), 0);
    m.load_state(read_safetensors(dir_ / (stem + ".safetensors")).tensors, stem + ".safetensors");
    return m;
  }
  // ONNX Runtime's (N, classes) for `x`, or an empty tensor where node or onnxruntime-node is missing.
  Tensor ort_logits(const fs::path& onnx, const Tensor& x, int64_t classes) {
    std::ofstream(dir_ / "x.f32", std::ios::binary)
        .write(static_cast<const char*>(x.raw()), static_cast<std::streamsize>(x.nbytes()));
    const CommandResult r = run_command("node " + kSource + "/tests/interchange/ort_run.js logits " + onnx.string() +
                                        " " + (dir_ / "x.f32").string() + " " + std::to_string(x.dim(0)) + " " +
                                        std::to_string(x.dim(1)) + " " + std::to_string(x.dim(2)) + " " +
                                        std::to_string(x.dim(3)) + " " + (dir_ / "y.f32").string() + " 2>&1");
    if (r.status == 3 || r.status == 127) {
      std::cout << "[  SKIP    ] ONNX Runtime: node or onnxruntime-node is missing\n";
      return {};
    }
    EXPECT_EQ(r.status, 0) << r.output;
    Tensor y = Tensor::empty({x.dim(0), classes});
    std::ifstream(dir_ / "y.f32", std::ios::binary)
        .read(static_cast<char*>(y.raw()), static_cast<std::streamsize>(y.nbytes()));
    return y;
  }
  std::string need_onnx_python() const {
    const CommandResult r = run_command(testing::torch_python() + " -c 'import onnx' 2>&1");
    return r.status == 0 ? "" : "python3-onnx is not installed (apt-get install python3-onnx)";
  }
  testing::TempDir dir_{"convoy-onnx-resize"};
};

// conv -> nn.Upsample nearest -> conv -> nn.Upsample bilinear -> F.interpolate to a size (bilinear,
// no whole factor; nearest, a whole one) -> conv -> softmax over channels -> mean -> linear ->
// softmax(dim=-1), exported by Debian's torch 1.13 (opset 17): each Resize and Softmax is its layer,
// the shape arithmetic of the sizes folds away, and the probabilities are PyTorch's.
TEST_F(OnnxResize, ImportsTorchUpsampleAndSoftmaxAndAgreesWithTorch) {
  const CommandResult made = run_command(testing::torch_python() + " " + kSource +
                                         "/tests/interchange/torch_resize.py " + dir_.path().string() + " 2>&1");
  if (made.status == 3) GTEST_SKIP() << "python3-torch is not installed (apt-get install python3-torch)";
  ASSERT_EQ(made.status, 0) << made.output;
  std::string yaml;
  Model m = import(dir_ / "torch.onnx", "t", &yaml);
  for (const char* part :
       {"{name: up1, type: upsample, scale: 2}", "{name: up2, type: upsample, mode: bilinear, scale: 2}",
        "type: upsample, mode: bilinear, size: [20, 33]", "type: upsample, size: [40, 66]",
        "{name: softmax, type: softmax}", "{name: softmax_1, type: softmax}"})
    EXPECT_NE(yaml.find(part), std::string::npos) << part << " in " << yaml;
  const SafetensorsFile golden = read_safetensors(dir_ / "golden.safetensors");
  EXPECT_LE(testing::relative_error(cpu_forward(m, golden.at("input")), golden.at("logits")), 1e-4);
}

// Convoy -> ONNX (Resize with scales, or sizes from the input's shape; Softmax axis 1) -> Convoy
// keeps the layers and the logits.
TEST_F(OnnxResize, RoundTripKeepsTheLogits) {
  testing::write_text_file(dir_ / "up.yaml", R"(name: upsample_softmax
input: [3, 7, 6]
layers:
  - {name: c1, type: conv2d, out_channels: 4, kernel: 3, padding: 1}
  - {name: near, type: upsample, scale: [2, 3]}
  - {name: c2, type: conv2d, out_channels: 4, kernel: 3, stride: 2}
  - {name: bi, type: upsample, mode: bilinear, scale: 2}
  - {name: bi_size, type: upsample, mode: bilinear, size: [9, 23]}
  - {name: near_size, type: upsample, size: [18, 46]}
  - {name: sm, type: softmax}
  - {name: gap, type: global_avg_pool}
  - {name: fc, type: linear, out_features: 5}
  - {name: probs, type: softmax}
)");
  const fs::path onnx = dir_ / "rt.onnx";
  CommandResult r = convoy("export --model " + (dir_ / "up.yaml").string() + " --seed 4 -o " + onnx.string());
  ASSERT_EQ(r.status, 0) << r.output;
  std::string yaml;
  Model back = import(onnx, "rt", &yaml);
  for (const char* part : {"{name: near, type: upsample, scale: [2, 3]}",
                           "{name: bi, type: upsample, mode: bilinear, scale: 2}",
                           "{name: bi_size, type: upsample, mode: bilinear, size: [9, 23]}",
                           "{name: near_size, type: upsample, size: [18, 46]}", "{name: sm, type: softmax}"})
    EXPECT_NE(yaml.find(part), std::string::npos) << part << " in " << yaml;
  Model original = Model::from_file((dir_ / "up.yaml").string(), 4);
  const Tensor x = test_input(2, original.input_shape());
  const Tensor y = cpu_forward(original, x);
  EXPECT_LE(testing::relative_error(cpu_forward(back, x), y), 1e-6);
  if (!need_onnx_python().empty()) return;
  r = run_command(testing::torch_python() + " " + kSource + "/tests/interchange/onnx_ops.py check " + onnx.string() +
                  " 2>&1");
  EXPECT_EQ(r.status, 0) << r.output;
  if (const Tensor ort = ort_logits(onnx, x, original.num_classes()); ort.defined()) {
    EXPECT_LE(testing::relative_error(ort, y), 1e-5);
  }
}

// onnx.helper files: Resize by scales and by sizes from a shape subgraph, Softmax over channels and
// over features import (and agree with ONNX Runtime where it is installed); cubic, align_corners,
// fractional scales, nearest other than PyTorch's, sizes that change the channels and softmax over
// other axes are refused with the node, the op and why.
TEST_F(OnnxResize, ImportsEachPatternAndRefusesWhatTheLayersCannotHonour) {
  if (const std::string why = need_onnx_python(); !why.empty()) GTEST_SKIP() << why;
  const CommandResult made = run_command(testing::torch_python() + " " + kSource +
                                         "/tests/interchange/onnx_resize_ops.py " + dir_.path().string() + " 2>&1");
  ASSERT_EQ(made.status, 0) << made.output;
  const std::vector<std::pair<const char*, const char*>> imported = {
      {"resize_nearest_scales", "{name: up, type: upsample, scale: [2, 3]}"},
      {"resize_linear_scales", "{name: up, type: upsample, mode: bilinear, scale: 2}"},
      {"resize_linear_sizes", "{name: up, type: upsample, mode: bilinear, size: [9, 4]}"},
      {"softmax_channels", "{name: sm, type: softmax}"},
      {"softmax_last_of_features", "{name: sm, type: softmax}"}};
  for (const auto& [name, part] : imported) {
    SCOPED_TRACE(name);
    std::string yaml;
    Model m = import(dir_ / (std::string(name) + ".onnx"), name, &yaml);
    EXPECT_NE(yaml.find(part), std::string::npos) << part << " in " << yaml;
    const Tensor x = test_input(2, m.input_shape());
    const Tensor y = cpu_forward(m, x);
    if (const Tensor ort = ort_logits(dir_ / (std::string(name) + ".onnx"), x, m.num_classes()); ort.defined()) {
      EXPECT_LE(testing::relative_error(y, ort), 1e-5);
    }
  }
  const std::vector<std::pair<const char*, const char*>> refused = {
      {"refused_cubic", "node 'up' (op Resize): mode 'cubic' is not supported"},
      {"refused_align_corners", "node 'up' (op Resize): linear with coordinate_transformation_mode 'align_corners'"},
      {"refused_fraction", "node 'up' (op Resize): scale 1.5 is not supported"},
      {"refused_nearest_half_pixel", "node 'up' (op Resize): nearest with coordinate_transformation_mode 'half_pixel'"},
      {"refused_sizes_channels", "node 'up' (op Resize): sizes give 8 channels to an input of 4"},
      {"refused_softmax_axis", "node 'sm' (op Softmax): axis 2 is not supported"},
      {"refused_softmax_last_of_planes", "node 'sm' (op Softmax): axis -1 of its (4, 6, 6) input per sample"}};
  for (const auto& [name, message] : refused) {
    const CommandResult r =
        convoy("import " + (dir_ / (std::string(name) + ".onnx")).string() + " -o " + (dir_ / "r.yaml").string());
    EXPECT_EQ(r.status, 1) << name << ": " << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << name << ": " << r.output;
  }
}

}  // namespace
}  // namespace convoy
