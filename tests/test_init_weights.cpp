// `convoy train --init-weights`: a torchvision-style state dict (saved by PyTorch, num_batches_tracked
// included) loads into the Convoy model with the same module names and gives PyTorch's logits;
// the report names missing, unexpected and mis-shaped tensors; strict loading refuses them; a new
// num_classes leaves only the classifier freshly initialized. Without PyTorch: a wrapper's prefix
// ("module.", "model.") is stripped, F16 and BF16 tensors load converted, and a file of which
// nothing loads is an error, strict or not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include "interchange/torch_fixture.h"
#include "run_command.h"
#include "temp_dir.h"
#include "engine/backends/backend.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/core/error.h"
#include "engine/graph/load_weights.h"
#include "engine/graph/model.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const std::string kYaml = std::string(CONVOY_SOURCE_DIR) + "/tests/interchange/small_resnet.yaml";

Tensor cpu_forward(Model& model, const Tensor& x) {
  const std::unique_ptr<Backend> cpu = make_cpu_backend({});
  model.to(*cpu, DType::f32);
  return model.forward(*cpu, x, StepInfo{});
}

bool contains(const std::vector<std::string>& v, const std::string& prefix) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.rfind(prefix, 0) == 0; });
}

class InitWeights : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = testing::run_torch_models("state", dir_.path()); !why.empty()) GTEST_SKIP() << why;
    state_ = read_safetensors(dir_ / "state.safetensors", ForeignDtypes::skip);
    golden_ = read_safetensors(dir_ / "golden.safetensors");
  }
  TempDir dir_{"convoy-init-weights"};
  SafetensorsFile state_, golden_;
};

TEST_F(InitWeights, TorchStateDictGivesTorchLogits) {
  // The file holds torchvision's keys, I64 counters among them, which Convoy does not keep.
  ASSERT_TRUE(state_.contains("layer2.0.downsample.0.weight"));
  EXPECT_EQ(state_.skipped.size(), 6u);  // one num_batches_tracked per batch norm (6)
  EXPECT_EQ(state_.skipped[0].second, "I64");
  Model model = Model::from_file(kYaml, 5);
  const WeightsLoadReport r = load_matching_weights(model, state_.tensors, state_.skipped, "", /*strict=*/true, "state");
  EXPECT_EQ(r.loaded.size(), model.state().size());
  EXPECT_TRUE(r.missing.empty() && r.unexpected.empty() && r.mismatched.empty() && r.classifier.empty());
  EXPECT_EQ(r.ignored.size(), 6u);
  EXPECT_NE(r.str("state").find("ignored: 6 num_batches_tracked"), std::string::npos) << r.str("state");
  const double err = testing::relative_error(cpu_forward(model, golden_.at("input")), golden_.at("logits"));
  EXPECT_LE(err, 1e-4);
}

TEST_F(InitWeights, NewNumClassesLeavesOnlyTheClassifierFresh) {
  const std::string yaml = Model::with_classes(Model::read_file(kYaml), kYaml, 3);
  Model fresh = Model::from_yaml(yaml, kYaml, 5);
  Model model = Model::from_yaml(yaml, kYaml, 5);
  const WeightsLoadReport r = load_matching_weights(model, state_.tensors, state_.skipped, "fc", /*strict=*/true, "state");
  EXPECT_EQ(r.classifier.size(), 2u);
  EXPECT_TRUE(contains(r.classifier, "fc.weight: file (5, 16) F32, model (3, 16) F32")) << r.str("s");
  EXPECT_TRUE(contains(r.classifier, "fc.bias"));
  EXPECT_EQ(r.loaded.size() + 2, model.state().size());
  EXPECT_NE(r.str("state").find("classifier resized"), std::string::npos);
  const std::vector<NamedTensor> loaded = model.state(), initial = fresh.state();
  for (size_t i = 0; i < loaded.size(); ++i) {
    const NamedTensor& t = loaded[i];
    const bool is_fc = t.name.rfind("fc.", 0) == 0;
    EXPECT_EQ(t.tensor.to_floats() == initial[i].tensor.to_floats(), is_fc) << t.name;
    if (!is_fc) {
      EXPECT_EQ(t.tensor.to_floats(), state_.at(t.name).to_floats()) << t.name;
    }
  }
}

TEST_F(InitWeights, ReportsMissingUnexpectedAndMisshapedAndStrictRefusesThem) {
  // The model differs from the file: layer2.0.conv1 has 12 channels, not 16 (so its batch norm and
  // layer2.0.conv2 mis-shape too),
  // and it has an extra layer; the file gets a tensor the model lacks.
  std::string yaml = Model::read_file(kYaml);
  const std::string conv = "layer2.0.conv1, type: conv2d, out_channels: 16";
  ASSERT_NE(yaml.find(conv), std::string::npos);
  yaml.replace(yaml.find(conv), conv.size(), "layer2.0.conv1, type: conv2d, out_channels: 12");
  yaml += "  - {name: extra.fc, type: linear, out_features: 5}\n";
  std::vector<NamedTensor> tensors = state_.tensors;
  tensors.push_back({"head.weight", Tensor::zeros({2})});
  Model fresh = Model::from_yaml(yaml, "m.yaml", 5);
  Model model = Model::from_yaml(yaml, "m.yaml", 5);
  try {
    load_matching_weights(model, tensors, state_.skipped, "", /*strict=*/true, "state.safetensors");
    ADD_FAILURE() << "strict loading accepted a mismatch";
  } catch (const InputError& e) {
    const std::string what = e.what();
    for (const char* part : {"state.safetensors", "strict", "missing: extra.fc.weight", "unexpected: head.weight",
                             "layer2.0.conv1.weight: file (16, 8, 3, 3) F32, model (12, 8, 3, 3) F32"})
      EXPECT_NE(what.find(part), std::string::npos) << part << " in " << what;
  }
  for (size_t i = 0; i < model.state().size(); ++i)  // strict failed: nothing was loaded
    EXPECT_EQ(model.state()[i].tensor.to_floats(), fresh.state()[i].tensor.to_floats());

  const WeightsLoadReport r = load_matching_weights(model, tensors, state_.skipped, "", /*strict=*/false, "s");
  EXPECT_EQ(r.missing, (std::vector<std::string>{"extra.fc.weight", "extra.fc.bias"}));
  EXPECT_EQ(r.unexpected, (std::vector<std::string>{"head.weight"}));
  EXPECT_EQ(r.mismatched.size(), 6u);  // layer2.0.conv1, its batch norm's 4, layer2.0.conv2
  EXPECT_TRUE(contains(r.mismatched, "layer2.0.bn1.running_var"));
  EXPECT_TRUE(contains(r.mismatched, "layer2.0.conv2.weight: file (16, 16, 3, 3) F32, model (16, 12, 3, 3) F32"));
  EXPECT_TRUE(contains(r.loaded, "layer1.0.conv1.weight"));
  EXPECT_TRUE(contains(r.loaded, "layer2.0.downsample.0.weight"));
  const std::string text = r.str("s");
  for (const char* part : {"mis-shaped", "missing in the file", "unexpected"}) EXPECT_NE(text.find(part), std::string::npos) << text;
  std::map<std::string, std::vector<float>> before;
  for (const NamedTensor& t : fresh.state()) before[t.name] = t.tensor.to_floats();
  for (const NamedTensor& t : model.state()) {
    const bool loaded = std::find(r.loaded.begin(), r.loaded.end(), t.name) != r.loaded.end();
    EXPECT_EQ(t.tensor.to_floats() == (loaded ? state_.at(t.name).to_floats() : before[t.name]), true) << t.name;
  }
}

// torchvision's ResNet-18 and ResNet-50 module trees (rebuilt in torch.nn): their state dicts load
// strictly into the shipped models/resnet18.yaml and resnet50.yaml and give PyTorch's logits.
TEST_F(InitWeights, TorchvisionResNetStateDictsLoadStrictlyIntoTheShippedModels) {
  for (const std::string arch : {"resnet18", "resnet50"}) {
    SCOPED_TRACE(arch);
    ASSERT_EQ(testing::run_torch_models(arch, dir_.path()), "");
    const SafetensorsFile file = read_safetensors(dir_ / (arch + ".safetensors"), ForeignDtypes::skip);
    const SafetensorsFile golden = read_safetensors(dir_ / "golden.safetensors");
    Model model = Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/" + arch + ".yaml", 1);
    const WeightsLoadReport r = load_matching_weights(model, file.tensors, file.skipped, "", /*strict=*/true, arch);
    EXPECT_EQ(r.loaded.size(), model.state().size());
    EXPECT_EQ(r.ignored.size(), arch == "resnet18" ? 20u : 53u);  // a num_batches_tracked per batch norm
    const double err = testing::relative_error(cpu_forward(model, golden.at("input")), golden.at("logits"));
    EXPECT_LE(err, 1e-4);
  }
}

// torchvision's MobileNetV2, MobileNetV3-Small and EfficientNet-B0 (Debian's python3-torchvision
// 0.14, random weights): each state dict loads strictly into the shipped models/<arch>.yaml, every
// tensor, with torchvision's parameter count, and gives PyTorch's logits.
struct ShippedTorchvision {
  const char* arch;
  int64_t parameters;  // torchvision's sum(p.numel() for p in model.parameters())
  size_t batch_norms;  // the num_batches_tracked the load skips
};
void PrintTo(const ShippedTorchvision& c, std::ostream* os) { *os << c.arch; }

class InitWeightsShipped : public InitWeights, public ::testing::WithParamInterface<ShippedTorchvision> {};

TEST_P(InitWeightsShipped, TorchvisionStateDictLoadsStrictlyIntoTheShippedModel) {
  const ShippedTorchvision c = GetParam();
  Model model = Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/" + c.arch + ".yaml", 1);
  EXPECT_EQ(model.parameter_count(), c.parameters);  // also test_mobile_models.cpp's, without torchvision
  if (const std::string why = testing::run_torch_models(c.arch, dir_.path()); !why.empty()) GTEST_SKIP() << why;
  const SafetensorsFile file = read_safetensors(dir_ / (std::string(c.arch) + ".safetensors"), ForeignDtypes::skip);
  const SafetensorsFile golden = read_safetensors(dir_ / "golden.safetensors");
  const WeightsLoadReport r = load_matching_weights(model, file.tensors, file.skipped, "", /*strict=*/true, c.arch);
  EXPECT_EQ(r.loaded.size(), model.state().size());
  EXPECT_EQ(r.ignored.size(), c.batch_norms);  // a num_batches_tracked per batch norm
  EXPECT_LE(testing::relative_error(cpu_forward(model, golden.at("input")), golden.at("logits")), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Mobile, InitWeightsShipped,
                         ::testing::Values(ShippedTorchvision{"mobilenet_v2", 3'504'872, 52},
                                           ShippedTorchvision{"mobilenet_v3_small", 2'542'856, 34},
                                           ShippedTorchvision{"efficientnet_b0", 5'288'548, 49}),
                         [](const auto& info) { return std::string(info.param.arch); });

// Through the command: a Fashion-MNIST run (10 classes) from the 5-class torch weights, strict.
TEST_F(InitWeights, TrainCommandPrintsTheReport) {
  const std::string data = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(data + "/t10k-images-idx3-ubyte.gz")) GTEST_SKIP() << "Fashion-MNIST is not installed at " << data;
  const std::string config = (dir_ / "run.yaml").string();
  testing::write_text_file(config, "name: ft\nmodel: " + kYaml + "\nnum_classes: 10\ndataset:\n  kind: fashion-mnist\n  path: " +
                                       data + "\n  train_limit: 256\n  test_limit: 256\nbatch_size: 64\nepochs: 1\n"
                                       "optimizer: {type: sgd, lr: 0.01, momentum: 0.9}\ndevice: cpu\noutput: {dir: " + dir_.path().string() + "}\n");
  const std::string convoy = std::string(CONVOY_BINARY) + " train --config " + config + " --init-weights " +
                             (dir_ / "state.safetensors").string();
  testing::CommandResult r = testing::run_command(convoy + " --init-weights-strict 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* part : {"init weights: loaded 30 of 32 tensors", "classifier resized", "fc.weight: file (5, 16) F32, model (10, 16) F32",
                           "ignored: 6 num_batches_tracked"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << " in " << r.output;
  // A Convoy checkpoint: the model's tensors load, its optimizer state is left out and counted.
  r = testing::run_command(std::string(CONVOY_BINARY) + " train --config " + config + " --set name=ft1 --init-weights " +
                           (dir_ / "ft/last.safetensors").string() + " --init-weights-strict 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* part : {"init weights: loaded 32 of 32 tensors", "optimizer state tensors (the run starts a fresh optimizer)"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << " in " << r.output;
  // A file that is not the model's: strict fails with exit 1 naming the tensors, non-strict reports them.
  write_safetensors(dir_ / "other.safetensors", std::vector<NamedTensor>{{"conv1.weight", Tensor::zeros({8, 3, 3, 3})}});
  const std::string other = std::string(CONVOY_BINARY) + " train --config " + config + " --set name=ft2 --init-weights " +
                            (dir_ / "other.safetensors").string();
  r = testing::run_command(other + " --init-weights-strict 2>&1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("conv1.weight: file (8, 3, 3, 3) F32, model (8, 1, 3, 3) F32"), std::string::npos) << r.output;
  r = testing::run_command(other + " --set name=ft3 2>&1");  // not strict, and nothing loads: an error too
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("no tensor matches model"), std::string::npos) << r.output;
  // The same from the config: init_weights: {path, strict}.
  const std::string by_config = std::string(CONVOY_BINARY) + " train --config " + config + " --set name=ft4 --set init_weights.path=" +
                                (dir_ / "other.safetensors").string();
  r = testing::run_command(by_config + " --set init_weights.strict=true 2>&1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("(strict loading)"), std::string::npos) << r.output;
  r = testing::run_command(by_config + " 2>&1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("conv1.weight: file (8, 3, 3, 3) F32, model (8, 1, 3, 3) F32"), std::string::npos) << r.output;
}

// The tensors of `model` under `prefix` + their names, converted to `dtype` (F32, F16 or BF16).
std::vector<NamedTensor> saved_as(Model& model, const std::string& prefix, DType dtype) {
  std::vector<NamedTensor> out;
  for (const NamedTensor& t : model.state()) {
    const std::vector<float> v = t.tensor.to_floats();
    Tensor c = Tensor::empty(t.tensor.shape(), dtype);
    for (size_t i = 0; i < v.size(); ++i) {
      if (dtype == DType::f32) c.data<float>()[i] = v[i];
      else c.data<uint16_t>()[i] = dtype == DType::f16 ? float_to_f16(v[i]) : float_to_bf16(v[i]);
    }
    out.push_back({prefix + t.name, c});
  }
  return out;
}

// A model with other weights than the file's: the seed differs.
Model fresh_model(uint64_t seed) { return Model::from_file(kYaml, seed); }

TEST(InitWeightsFiles, AWrappersPrefixIsStrippedAndSaidSo) {
  Model source = fresh_model(9);
  for (const std::string prefix : {"module.", "model.", "module.model."}) {
    SCOPED_TRACE(prefix);
    std::vector<NamedTensor> file = saved_as(source, prefix, DType::f32);
    // PyTorch's I64 batch counters carry the prefix too (read_safetensors lists them as skipped).
    const std::vector<std::pair<std::string, std::string>> counters = {{prefix + "bn1.num_batches_tracked", "I64"}};
    for (const bool strict : {false, true}) {
      Model model = fresh_model(5);
      const WeightsLoadReport r = load_matching_weights(model, file, counters, "", strict, "dp.safetensors");
      EXPECT_EQ(r.stripped_prefix, prefix);
      EXPECT_EQ(r.loaded.size(), model.state().size());
      EXPECT_TRUE(r.unexpected.empty() && r.missing.empty() && r.mismatched.empty()) << r.str("dp");
      EXPECT_EQ(r.ignored, (std::vector<std::string>{"bn1.num_batches_tracked"}));
      EXPECT_NE(r.str("dp").find("stripped the prefix '" + prefix + "'"), std::string::npos) << r.str("dp");
      std::map<std::string, std::vector<float>> want;
      for (const NamedTensor& t : source.state()) want[t.name] = t.tensor.to_floats();
      for (const NamedTensor& t : model.state()) EXPECT_EQ(t.tensor.to_floats(), want[t.name]) << t.name;
    }
  }
  // Names as they are: nothing stripped, nor when the model's own names share a first component,
  // where stripping would match fewer.
  Model model = fresh_model(5);
  EXPECT_EQ(load_matching_weights(model, saved_as(source, "", DType::f32), {}, "", true, "f").stripped_prefix, "");
  const std::string nested = "name: nested\ninput: [1, 8, 8]\nlayers:\n"
                             "  - {name: features.conv, type: conv2d, out_channels: 4, kernel: 3}\n"
                             "  - {name: features.bn, type: batchnorm2d}\n"
                             "  - {name: features.pool, type: global_avg_pool}\n"
                             "  - {name: features.flat, type: flatten}\n"
                             "  - {name: features.fc, type: linear, out_features: 3}\n";
  Model a = Model::from_yaml(nested, "nested", 1), b = Model::from_yaml(nested, "nested", 2);
  const WeightsLoadReport r = load_matching_weights(b, saved_as(a, "", DType::f32), {}, "", true, "f");
  EXPECT_EQ(r.stripped_prefix, "");
  EXPECT_EQ(r.loaded.size(), b.state().size());
}

// Half-precision files (model.half() saved): loaded converted, to within F16's or BF16's rounding
// of the F32 weights (the conversion itself is exact: the loaded value is the file's).
TEST(InitWeightsFiles, F16AndBf16TensorsLoadConvertedAndSaidSo) {
  testing::TempDir dir("convoy-init-half");
  Model source = fresh_model(9);
  std::map<std::string, std::vector<float>> want;
  for (const NamedTensor& t : source.state()) want[t.name] = t.tensor.to_floats();
  for (const DType dtype : {DType::f16, DType::bf16}) {
    const std::string name(dtype_name(dtype));
    SCOPED_TRACE(name);
    // Through a file, as --init-weights reads it, with DataParallel's prefix as well.
    const fs::path path = dir / (name + ".safetensors");
    write_safetensors(path, saved_as(source, "module.", dtype));
    const SafetensorsFile file = read_safetensors(path, ForeignDtypes::skip);
    Model model = fresh_model(5);
    const WeightsLoadReport r = load_matching_weights(model, file.tensors, file.skipped, "", true, path.string());
    EXPECT_EQ(r.loaded.size(), model.state().size());
    EXPECT_EQ(r.converted.size(), model.state().size());
    EXPECT_TRUE(r.mismatched.empty()) << r.str("f");
    EXPECT_NE(r.str("f").find("converted " + std::to_string(r.converted.size()) + " " + name + " tensors to F32"),
              std::string::npos) << r.str("f");
    // F16 keeps 11 significant bits, BF16 8: a relative error of at most 2^-11 or 2^-8 (F16's
    // subnormals below 2^-14 are exact to 2^-24 absolute).
    const double unit = dtype == DType::f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    double worst = 0;
    for (const NamedTensor& t : model.state()) {
      const std::vector<float> got = t.tensor.to_floats(), in_file = file.at("module." + t.name).to_floats();
      EXPECT_EQ(got, in_file) << t.name;  // widening is exact
      for (size_t i = 0; i < got.size(); ++i) {
        const double w = want[t.name][i], err = std::abs(double{got[i]} - w);
        EXPECT_LE(err, unit * std::abs(w) + std::ldexp(1.0, -24)) << t.name << "[" << i << "]";
        worst = std::max(worst, err / std::max(std::abs(w), 1e-3));
      }
    }
    EXPECT_GT(worst, 0.0) << "the rounding was not exercised";
  }
}

TEST(InitWeightsFiles, AFileOfWhichNothingLoadsIsAnErrorStrictOrNot) {
  Model source = fresh_model(9);
  std::vector<NamedTensor> unrelated = {{"encoder.weight", Tensor::zeros({4, 4})}, {"decoder.bias", Tensor::zeros({4})}};
  std::vector<NamedTensor> misshaped = {{"conv1.weight", Tensor::zeros({8, 3, 3, 3})}};
  for (const bool strict : {false, true}) {
    for (const auto* file : {&unrelated, &misshaped}) {
      Model model = fresh_model(5);
      const std::vector<float> before = model.state()[0].tensor.to_floats();
      try {
        load_matching_weights(model, *file, {}, "", strict, "other.safetensors");
        ADD_FAILURE() << "nothing matched, and no error";
      } catch (const InputError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("other.safetensors"), std::string::npos) << what;
        if (!strict) {
          EXPECT_NE(what.find("no tensor matches model 'small_resnet'"), std::string::npos) << what;
          EXPECT_NE(what.find((*file)[0].name), std::string::npos) << what;  // the file's names, to compare
        }
      }
      EXPECT_EQ(model.state()[0].tensor.to_floats(), before);
    }
  }
  // One tensor that loads is enough for a non-strict run.
  Model model = fresh_model(5);
  std::vector<NamedTensor> one = {saved_as(source, "", DType::f32)[0]};
  EXPECT_EQ(load_matching_weights(model, one, {}, "", false, "one").loaded.size(), 1u);
}

// Through the command, as the user met it: a DataParallel checkpoint saved in F16 starts a run, saying
// what it stripped and converted; the report's numbers are the model's.
TEST(InitWeightsFiles, TrainCommandSaysWhatItStrippedAndConverted) {
  const std::string data = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(data + "/t10k-images-idx3-ubyte.gz")) GTEST_SKIP() << "Fashion-MNIST is not installed at " << data;
  testing::TempDir dir("convoy-init-cli");
  Model source = Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/lenet5.yaml", 9);
  const size_t tensors = source.state().size();
  write_safetensors(dir / "dp.safetensors", saved_as(source, "module.", DType::f16));
  const std::string train = std::string(CONVOY_BINARY) + " train --config " + CONVOY_SOURCE_DIR +
                            "/configs/fashion_mnist.yaml --set output.dir=" + dir.path().string() +
                            " --set dataset.train_limit=128 --set dataset.test_limit=64 --set batch_size=64 "
                            "--set device=cpu --max-steps 1 --init-weights ";
  testing::CommandResult r = testing::run_command(train + (dir / "dp.safetensors").string() + " --init-weights-strict 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const std::string& part : {"init weights: loaded " + std::to_string(tensors) + " of " + std::to_string(tensors),
                                 std::string("stripped the prefix 'module.'"),
                                 "converted " + std::to_string(tensors) + " F16 tensors to F32"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << " in " << r.output;
  // A file of which nothing loads: exit 1, not a run from scratch.
  write_safetensors(dir / "other.safetensors", std::vector<NamedTensor>{{"encoder.weight", Tensor::zeros({2, 2})}});
  r = testing::run_command(train + (dir / "other.safetensors").string() + " --set name=other 2>&1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("no tensor matches model 'lenet5'"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace convoy
