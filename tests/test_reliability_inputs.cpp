// Hostile inputs (issue 16, points 1, 3, 6 and the loading half of 2): absurd sizes, nan and
// inf, out-of-range checkpoint metadata, non-finite checkpoints and files that are not files.
// Each one is an InputError naming the file and the key or tensor, never a crash, an internal
// error or an endless read; test_reliability_cli.cpp checks the same through `convoy` (exit 1).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "engine/bundle/run_checkpoint.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/config/run_config.h"
#include "engine/config/yaml_map.h"
#include "engine/core/error.h"
#include "engine/core/tensor.h"
#include "engine/graph/model.h"
#include "input_error.h"
#include "reliability_fixtures.h"
#include "temp_dir.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;
using testing::input_error_of;
using testing::kSmallModel;
using testing::TempDir;

const std::string kModels = std::string(CONVOY_SOURCE_DIR) + "/models";

std::string config_error(const std::string& text, std::vector<std::string> overrides = {}) {
  return input_error_of([&] { parse_run_config(text, "run.yaml", kModels, overrides); }, text);
}

std::string model_error(const std::string& text) {
  return input_error_of([&] { Model::from_yaml(text, "net.yaml", 1); }, text);
}

// ---- point 1: sizes ----

TEST(ReliabilityInputs, ShapeNumelOverflowIsAnErrorNotAWrap) {
  const int64_t big = int64_t{1} << 62;
  EXPECT_HAS(input_error_of([&] { shape_numel({big, 4}); }, "numel"), "too many elements");
  EXPECT_HAS(input_error_of([&] { shape_numel({big, big, big}); }, "numel"), "too many elements");
  EXPECT_EQ(shape_numel({big, 1}), big);
  // Elements that fit, bytes that do not.
  EXPECT_HAS(input_error_of([&] { Tensor::empty({big, 1}); }, "empty"), "too large");
  EXPECT_EQ(saturating_mul(big, 4), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(saturating_add(std::numeric_limits<int64_t>::max(), 1), std::numeric_limits<int64_t>::max());
}

TEST(ReliabilityInputs, LinearOutFeaturesBeyondTheBoundIsNamed) {
  const std::string e = model_error(
      "name: big\ninput: [1, 8, 8]\nlayers:\n  - {type: flatten}\n"
      "  - {name: fc, type: linear, out_features: 4611686018427387904}\n");
  EXPECT_HAS(e, "net.yaml:5");
  EXPECT_HAS(e, "out_features: 4611686018427387904 is out of range (expected 1 ... 16777216)");
}

TEST(ReliabilityInputs, LinearWeightsBeyondTheLayerBoundAreRefusedBeforeAllocation) {
  // 2^24 x 2^14 features = 2^38 weights: each size in bounds, their product not.
  const std::string e = model_error(
      "name: big\ninput: [1, 128, 128]\nlayers:\n  - {type: flatten}\n"
      "  - {name: fc, type: linear, out_features: 16777216}\n");
  EXPECT_HAS(e, "net.yaml:5");
  EXPECT_HAS(e, "layer 'fc' (linear)");
  EXPECT_HAS(e, "weights a layer may have");
}

TEST(ReliabilityInputs, ConvolutionSizesAreBounded) {
  const std::string head = "name: c\ninput: [3, 32, 32]\nlayers:\n  - {name: conv, type: conv2d, ";
  const std::string tail = "}\n  - {type: flatten}\n  - {type: linear, out_features: 2}\n";
  EXPECT_HAS(model_error(head + "out_channels: 1099511627776, kernel: 3" + tail), "out_channels: 1099511627776 is out of range");
  EXPECT_HAS(model_error(head + "out_channels: 4, kernel: 100000" + tail), "kernel: 100000 is out of range (expected 1 ... 1024)");
  EXPECT_HAS(model_error(head + "out_channels: 4, kernel: [3, -1]" + tail), "kernel: -1 is out of range");
  EXPECT_HAS(model_error(head + "out_channels: 4, kernel: 3, stride: 4611686018427387904" + tail), "stride: 4611686018427387904 is out of range");
  EXPECT_HAS(model_error(head + "out_channels: 4, kernel: 3, padding: 4611686018427387904" + tail), "padding: 4611686018427387904 is out of range");
  EXPECT_HAS(model_error(head + "out_channels: 4, kernel: 3, dilation: 9223372036854775807" + tail), "dilation: 9223372036854775807 is out of range");
  EXPECT_HAS(model_error(head + "out_channels: 4, kernel: 3, groups: 4611686018427387904" + tail), "groups: 4611686018427387904 is out of range");
  // Every size in bounds, the weights not: 2^24 x 3 x 1024 x 1024.
  EXPECT_HAS(model_error(head + "out_channels: 16777216, kernel: [1024, 1024], padding: 512" + tail),
             "weights a layer may have");
}

TEST(ReliabilityInputs, PoolingWindowIsBounded) {
  const std::string e = model_error(
      "name: p\ninput: [1, 8, 8]\nlayers:\n  - {name: pool, type: maxpool2d, kernel: 2, stride: 4611686018427387904}\n"
      "  - {type: flatten}\n  - {type: linear, out_features: 2}\n");
  EXPECT_HAS(e, "pool).stride: 4611686018427387904 is out of range");
}

TEST(ReliabilityInputs, InputShapeAndActivationsAreBounded) {
  EXPECT_HAS(model_error("name: i\ninput: [3, 4611686018427387904, 2]\nlayers:\n  - {type: flatten}\n"),
             "input: dimensions must be at most");
  EXPECT_HAS(model_error("name: i\ninput: [16777216, 65536, 65536]\nlayers:\n  - {type: flatten}\n"),
             "elements per sample");
  // A convolution whose output per sample is beyond the bound: 2^24 channels of 1024 x 1024.
  const std::string e = model_error(
      "name: a\ninput: [1, 1024, 1024]\nlayers:\n  - {name: conv, type: conv2d, out_channels: 16777216, kernel: 1}\n"
      "  - {type: flatten}\n  - {type: linear, out_features: 2}\n");
  EXPECT_HAS(e, "net.yaml:4");
  EXPECT_HAS(e, "elements per sample");
}

TEST(ReliabilityInputs, ThreadsAndOtherRunSizesAreBounded) {
  EXPECT_HAS(config_error("model: lenet5.yaml\nthreads: 100000\n"),
             "run.yaml:2: threads: 100000 is out of range (expected 0 (all cores) or 1 ... 1024)");
  EXPECT_HAS(config_error("model: lenet5.yaml\nthreads: -1\n"), "threads: -1 is out of range");
  EXPECT_HAS(config_error("model: lenet5.yaml\n", {"threads=9223372036854775807"}), "threads: 9223372036854775807 is out");
  EXPECT_HAS(config_error("model: lenet5.yaml\nbatch_size: 4611686018427387904\n"), "batch_size: 4611686018427387904 is out of range");
  EXPECT_HAS(config_error("model: lenet5.yaml\nepochs: 9223372036854775807\n"), "epochs: 9223372036854775807 is out of range");
  EXPECT_HAS(config_error("model: lenet5.yaml\nepochs: 99999999999999999999\n"), "epochs: expected an integer");
  EXPECT_HAS(config_error("model: lenet5.yaml\ndataset: {augment: {crop_padding: 4611686018427387904}}\n"),
             "dataset.augment.crop_padding: 4611686018427387904 is out of range");
  EXPECT_HAS(config_error("model: lenet5.yaml\ndataset: {kind: synthetic, synthetic: {shape: [3, 4611686018427387904, 2]}}\n"),
             "dataset.synthetic.shape: dimensions must be in 1 ... 8192");
  EXPECT_HAS(config_error("model: lenet5.yaml\ndataset: {kind: synthetic, synthetic: {size: 4611686018427387904}}\n"),
             "dataset.synthetic.size");
  EXPECT_HAS(config_error("model: lenet5.yaml\noutput: {log_every: 4611686018427387904}\n"), "output.log_every");
  // A device number that std::stoi could not hold.
  EXPECT_HAS(config_error("model: lenet5.yaml\ndevice: cuda:99999999999999999999\n"), "device: 'cuda:99999999999999999999'");
  EXPECT_EQ(parse_run_config("model: lenet5.yaml\nthreads: 1024\n", "run.yaml", kModels, {}).threads, 1024);
}

// ---- point 3: nan and inf ----

TEST(ReliabilityInputs, TheYamlReaderRefusesNonFiniteNumbers) {
  const YamlMap map(yaml_load_string("a: .nan\nb: .inf\nc: -.inf\nd: [1, .nan]\ne: 2.5\n", "f.yaml"), "f.yaml", "top");
  EXPECT_HAS(input_error_of([&] { map.get_double("a"); }, "a"), "f.yaml:1: top.a: expected a finite number, found '.nan'");
  EXPECT_HAS(input_error_of([&] { map.get_double("b", 1.0); }, "b"), "top.b: expected a finite number, found '.inf'");
  EXPECT_HAS(input_error_of([&] { map.get_doubles("c", {}); }, "c"), "top.c: expected finite numbers, found -inf");
  EXPECT_HAS(input_error_of([&] { map.get_doubles("d", {}); }, "d"), "top.d: expected finite numbers, found nan");
  EXPECT_EQ(map.get_double("e"), 2.5);
}

TEST(ReliabilityInputs, RunConfigFloatKeysRefuseNanAndInf) {
  const std::string m = "model: lenet5.yaml\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"optimizer: {lr: .inf}\n", "optimizer.lr"},
      {"optimizer: {lr: .nan}\n", "optimizer.lr"},
      {"optimizer: {momentum: .nan}\n", "optimizer.momentum"},
      {"optimizer: {weight_decay: .nan}\n", "optimizer.weight_decay"},
      {"optimizer: {type: adamw, beta1: .nan}\n", "optimizer.beta1"},
      {"optimizer: {type: adamw, beta2: .inf}\n", "optimizer.beta2"},
      {"optimizer: {type: adamw, eps: .nan}\n", "optimizer.eps"},
      {"dataset: {normalize: {mean: [.nan], std: [0.5]}}\n", "dataset.normalize.mean"},
      {"dataset: {normalize: {mean: [0.5], std: [.inf]}}\n", "dataset.normalize.std"},
      {"dataset: {augment: {random_resized_crop: {scale: [.nan, 1]}}}\n", "random_resized_crop.scale"},
      {"dataset: {augment: {random_resized_crop: {ratio: [0.5, .inf]}}}\n", "random_resized_crop.ratio"},
      {"schedule: {warmup_epochs: .nan}\n", "schedule.warmup_epochs"},
      {"schedule: {warmup_start_factor: .nan}\n", "schedule.warmup_start_factor"},
      {"schedule: {type: step, milestones: [1, .inf]}\n", "schedule.milestones"},
      {"schedule: {type: step, milestones: [1], gamma: .nan}\n", "schedule.gamma"},
      {"schedule: {type: cosine, min_lr: .nan}\n", "schedule.min_lr"},
      {"schedule: {type: onecycle, pct_start: .nan}\n", "schedule.pct_start"},
      {"schedule: {type: onecycle, div_factor: .inf}\n", "schedule.div_factor"},
      {"schedule: {type: onecycle, final_div_factor: .nan}\n", "schedule.final_div_factor"},
      {"label_smoothing: .nan\n", "label_smoothing"},
  };
  for (const auto& [text, key] : cases) {
    const std::string e = config_error(m + text);
    EXPECT_HAS(e, "run.yaml:");
    EXPECT_HAS(e, key + ": expected ");
    EXPECT_HAS(e, "finite");
  }
  // The same through --set.
  EXPECT_HAS(config_error(m, {"optimizer.lr=.inf"}), "optimizer.lr: expected a finite number, found '.inf'");
}

TEST(ReliabilityInputs, RunConfigFloatKeysAreRangeChecked) {
  const std::string m = "model: lenet5.yaml\n";
  EXPECT_HAS(config_error(m + "label_smoothing: 1.0\n"), "label_smoothing: must be in [0, 1)");
  EXPECT_HAS(config_error(m + "optimizer: {momentum: 1.0}\n"), "optimizer.momentum: must be in [0, 1)");
  EXPECT_HAS(config_error(m + "optimizer: {lr: -1}\n"), "optimizer.lr: must be greater than 0");
  EXPECT_HAS(config_error(m + "schedule: {warmup_epochs: 1e300}\n"), "schedule.warmup_epochs: must be in");
  EXPECT_HAS(config_error(m + "schedule: {warmup_start_factor: 2}\n"), "schedule.warmup_start_factor: must be in [0, 1]");
  EXPECT_HAS(config_error(m + "schedule: {type: step, milestones: [1e300]}\n"), "schedule.milestones: epochs must be in");
  EXPECT_HAS(config_error(m + "schedule: {type: step, milestones: [-1]}\n"), "schedule.milestones: epochs must be in");
  EXPECT_HAS(config_error(m + "schedule: {type: step, milestones: [1], gamma: 0}\n"), "schedule.gamma: must be greater than 0");
  EXPECT_HAS(config_error(m + "schedule: {type: cosine, min_lr: -1}\n"), "schedule.min_lr: must not be negative");
  EXPECT_HAS(config_error(m + "schedule: {type: onecycle, div_factor: 0}\n"), "schedule.div_factor: must be greater than 0");
  EXPECT_HAS(config_error(m + "dataset: {normalize: {mean: [1e300], std: [1]}}\n"), "dataset.normalize.mean: values must be in");
}

TEST(ReliabilityInputs, ModelFloatAttributesRefuseNanAndInf) {
  const std::string head = "name: f\ninput: [1, 8, 8]\nlayers:\n";
  const std::string tail = "  - {type: flatten}\n  - {type: linear, out_features: 2}\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"  - {name: bn, type: batchnorm2d, eps: .nan}\n", "(bn).eps: expected a finite number"},
      {"  - {name: bn, type: batchnorm2d, momentum: .nan}\n", "(bn).momentum: expected a finite number"},
      {"  - {name: bn, type: batchnorm2d, eps: .inf}\n", "(bn).eps: expected a finite number"},
      {"  - {name: act, type: leaky_relu, negative_slope: .nan}\n", "(act).negative_slope: expected a finite number"},
      {"  - {name: drop, type: dropout, p: .nan}\n", "(drop).p: expected a finite number"},
      // Finite, but out of range (or infinite once a float).
      {"  - {name: bn, type: batchnorm2d, eps: 1e300}\n", "(bn).eps: must be positive"},
      {"  - {name: bn, type: batchnorm2d, eps: 1e-300}\n", "(bn).eps: must be positive"},
      {"  - {name: bn, type: batchnorm2d, momentum: 2}\n", "(bn).momentum: must be in [0, 1]"},
      {"  - {name: act, type: leaky_relu, negative_slope: 1e300}\n", "(act).negative_slope: must be in"},
      {"  - {name: drop, type: dropout, p: 1}\n", "(drop).p: must be in [0, 1)"},
  };
  for (const auto& [layer, fragment] : cases) {
    const std::string e = model_error(head + layer + tail);
    EXPECT_HAS(e, "net.yaml:4");
    EXPECT_HAS(e, fragment);
  }
}

// ---- point 6: user errors that were internal errors ----

TEST(ReliabilityInputs, ModelWithoutLayersIsAnInputError) {
  EXPECT_HAS(model_error("name: n\ninput: [1, 8, 8]\n"), "net.yaml:1: layers: missing: expected a non-empty list of layers");
  EXPECT_HAS(model_error("name: n\ninput: [1, 8, 8]\nlayers: 3\n"), "layers: expected a non-empty list of layers");
  EXPECT_HAS(model_error("name: n\ninput: [1, 8, 8]\nlayers: []\n"), "layers: expected a non-empty list of layers");
  // num_classes on a model whose layers are not mappings, or whose output is not a name.
  EXPECT_HAS(input_error_of([] { Model::with_classes("name: n\nlayers: [3]\n", "net.yaml", 5); }, "with_classes"),
             "net.yaml: ");
  EXPECT_HAS(input_error_of([] { Model::with_classes("name: n\noutput: [a]\nlayers: [{type: linear}]\n", "net.yaml", 5); },
                            "with_classes"),
             "net.yaml: ");
}

TEST(ReliabilityInputs, DevicesAndHugeFilesAreNotReadAsYaml) {
  EXPECT_HAS(input_error_of([] { Model::from_file("/dev/zero", 1); }, "/dev/zero"), "/dev/zero: not a regular file");
  EXPECT_HAS(input_error_of([] { load_run_config("/dev/zero", {}); }, "/dev/zero"), "/dev/zero: not a regular file");
  EXPECT_HAS(input_error_of([] { yaml_load_file("/dev/zero"); }, "/dev/zero"), "/dev/zero: not a regular file");
  TempDir dir("convoy-reliability");
  const fs::path fifo = dir / "fifo.yaml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_HAS(input_error_of([&] { Model::from_file(fifo.string(), 1); }, "fifo"), "fifo.yaml: not a regular file");
  const fs::path big = dir / "big.yaml";
  {
    std::ofstream out(big);
    out << "name: big\n";
    const std::string comment = "#" + std::string(1023, 'x') + "\n";
    for (int i = 0; i < 17 * 1024; ++i) out << comment;
  }
  EXPECT_HAS(input_error_of([&] { Model::from_file(big.string(), 1); }, "big"), "big.yaml: the model file of");
  EXPECT_HAS(input_error_of([&] { Model::from_file(big.string(), 1); }, "big"), "is too large (at most 16777216 bytes)");
  // A config whose model is a device names the key.
  EXPECT_HAS(config_error("model: /dev/zero\n"), "run.yaml:1: model: /dev/zero is not a regular file");
  EXPECT_HAS(config_error("model: /\n"), "model: / is not a regular file");
}

TEST(ReliabilityInputs, YamlThatIsNotUtf8IsRefusedUpFront) {
  // Checkpoint metadata is JSON: a model YAML in Latin-1 would fail the first save after an
  // epoch of training. It fails when read, naming the line.
  EXPECT_HAS(model_error("name: n\n# caf\xe9\ninput: [1, 8, 8]\nlayers: [{type: flatten}]\n"),
             "net.yaml:2: not UTF-8 text");
  EXPECT_HAS(config_error("model: lenet5.yaml\nname: \xff\n"), "run.yaml:2: not UTF-8 text");
  EXPECT_EQ(invalid_utf8_at("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), std::string::npos);
  EXPECT_EQ(invalid_utf8_at("ab\xc0\xaf"), 2u);      // overlong '/'
  EXPECT_EQ(invalid_utf8_at("\xed\xa0\x80"), 0u);    // a surrogate
  EXPECT_EQ(invalid_utf8_at("x\xe2\x82"), 1u);        // cut short
}

// ---- checkpoints: metadata ranges and non-finite tensors ----

class CraftedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    Model model = Model::from_yaml(kSmallModel, "small.yaml", 1);
    RunCheckpointInfo info;
    info.model_yaml = model.yaml();
    info.config_yaml = "name: run\n";
    info.class_names = {"a", "b"};
    info.input_shape = model.input_shape();
    info.mean = {0.5};
    info.std = {0.25};
    info.epoch = 1;
    info.step = 4;
    info.test_accuracy = 0.5;
    info.best_accuracy = 0.75;
    path_ = dir_ / "last.safetensors";
    save_run_checkpoint(path_, model, {}, info);
  }
  // The checkpoint with one metadata value replaced.
  fs::path with_metadata(const std::string& key, const std::string& value) {
    SafetensorsFile f = read_safetensors(path_);
    f.metadata[key] = value;
    const fs::path out = dir_ / ("edited_" + std::to_string(edits_++) + ".safetensors");
    write_safetensors(out, f.tensors, f.metadata);
    return out;
  }
  // The checkpoint with element `index` of tensor `name` set to `value`.
  fs::path with_value(const std::string& name, int64_t index, float value) {
    SafetensorsFile f = read_safetensors(path_);
    bool found = false;
    for (NamedTensor& t : f.tensors)
      if (t.name == name) t.tensor.data<float>()[index] = value, found = true;
    EXPECT_TRUE(found) << name;
    const fs::path out = dir_ / ("edited_" + std::to_string(edits_++) + ".safetensors");
    write_safetensors(out, f.tensors, f.metadata);
    return out;
  }
  std::string error(const fs::path& path, CheckpointUse use) {
    return input_error_of([&] { read_run_checkpoint(path, use); }, path.string());
  }
  TempDir dir_{"convoy-reliability-ckpt"};
  fs::path path_;
  int edits_ = 0;
};

TEST_F(CraftedCheckpoint, TheUneditedCheckpointReads) {
  const RunCheckpoint r = read_run_checkpoint(path_, CheckpointUse::resume);
  EXPECT_EQ(r.info.epoch, 1);
  EXPECT_DOUBLE_EQ(r.info.best_accuracy, 0.75);
  const RunCheckpoint i = read_run_checkpoint(path_, CheckpointUse::inference);
  check_checkpoint_fits_model(i.info, Model::from_yaml(i.info.model_yaml, "m", 0), path_.string());
}

TEST_F(CraftedCheckpoint, ResumeCountersAreRangeChecked) {
  const auto expect = [&](const std::string& key, const std::string& value, const std::string& fragment) {
    const fs::path p = with_metadata(key, value);
    const std::string e = error(p, CheckpointUse::resume);
    EXPECT_HAS(e, p.string() + ": checkpoint metadata '" + key + "'");
    EXPECT_HAS(e, fragment);
  };
  expect("epoch", "9223372036854775807", "out of range (expected 0 ... 1000000)");
  expect("epoch", "-1", "out of range");
  expect("epoch", "99999999999999999999", "is not an integer");
  expect("epoch", "12abc", "is not an integer: '12abc'");
  expect("epoch", "", "is not an integer");
  expect("step", "-5", "out of range");
  expect("step", "9223372036854775807", "out of range");
  expect("batch_in_epoch", "-1", "out of range");
  expect("best_accuracy", "2.0", "out of range (expected a finite number in [0, 1])");
  expect("best_accuracy", "nan", "out of range");
  expect("best_accuracy", "abc", "is not a number: 'abc'");
  expect("best_accuracy", "1e999", "is not a number");
  expect("best_accuracy", "0.5x", "is not a number");
  expect("test_accuracy", "inf", "out of range");
  expect("test_accuracy", "-0.1", "out of range");
}

TEST_F(CraftedCheckpoint, InferenceMetadataIsRangeChecked) {
  const auto expect = [&](const std::string& key, const std::string& value, const std::string& fragment) {
    const fs::path p = with_metadata(key, value);
    const std::string e = error(p, CheckpointUse::inference);
    EXPECT_HAS(e, p.string() + ": checkpoint metadata '");
    EXPECT_HAS(e, fragment);
  };
  expect("std", "[-0.5]", "'std': expected finite values in (0, 1e6]");
  expect("std", "[0]", "'std': expected finite values");
  expect("std", "[1e300]", "'std': expected finite values");
  expect("mean", "[1e300]", "'mean': expected finite values");
  expect("mean", "[null]", "'mean' is malformed");  // how JSON writes a nan
  expect("mean", "[]", "1 to 4");
  expect("std", "[0.1, 0.2]", "one value per channel");
  expect("preprocess",
         R"({"input": [1, 8, 8], "resize": 0, "random_resized_crop": {"scale": [-1, 2], "ratio": [0.5, 2]}})",
         "'scale' must be [min, max]");
}

TEST_F(CraftedCheckpoint, TheQuantizationRecordIsChecked) {
  // An 8-bit checkpoint's record of what its ranges are for (convoy quantize --device/--precision).
  const auto expect = [&](const std::string& record, const std::string& fragment) {
    SafetensorsFile f = read_safetensors(path_);
    f.metadata["int8_activation_max"] = R"({"input": 1})";
    f.metadata["quantization"] = record;
    const fs::path p = dir_ / ("edited_" + std::to_string(edits_++) + ".safetensors");
    write_safetensors(p, f.tensors, f.metadata);
    const std::string e = error(p, CheckpointUse::inference);
    EXPECT_HAS(e, p.string() + ": checkpoint metadata 'quantization'");
    EXPECT_HAS(e, fragment);
  };
  const std::string ok = R"("type": "int8", "method": "percentile", "percentile": 99.99)";
  expect(R"({"device": "tpu", )" + ok + "}", "device 'tpu', expected cpu or cuda");
  expect(R"({"device": "cuda", "type": "int4", "method": "max", "percentile": 100})", "type 'int4', expected int8 or fp8");
  expect(R"({"device": "cuda", "type": "fp8", "method": "entropy", "percentile": 100})", "method 'entropy'");
  expect(R"({"device": "cuda", "type": "int8", "method": "percentile", "percentile": 0})", "percentile out of (0, 100]");
  expect(R"({"device": "cuda", "type": "int8"})", "method");  // a field missing
  expect("[1, 2", "malformed");
}

TEST_F(CraftedCheckpoint, MetadataMustFitTheModel) {
  const auto fit_error = [&](const std::string& key, const std::string& value) {
    const fs::path p = with_metadata(key, value);
    const RunCheckpoint c = read_run_checkpoint(p, CheckpointUse::inference);
    const Model model = Model::from_yaml(c.info.model_yaml, "m", 0);
    return input_error_of([&] { check_checkpoint_fits_model(c.info, model, p.string()); }, key);
  };
  // The model takes 1 channel: 3 values are wrong even though the lengths agree.
  SafetensorsFile f = read_safetensors(path_);
  f.metadata["mean"] = "[0.5, 0.5, 0.5]";
  f.metadata["std"] = "[0.5, 0.5, 0.5]";
  const fs::path three = dir_ / "three.safetensors";
  write_safetensors(three, f.tensors, f.metadata);
  const RunCheckpoint c = read_run_checkpoint(three, CheckpointUse::inference);
  const Model model = Model::from_yaml(c.info.model_yaml, "m", 0);
  const std::string e = input_error_of([&] { check_checkpoint_fits_model(c.info, model, three.string()); }, "mean");
  EXPECT_HAS(e, three.string() + ": checkpoint metadata 'mean' has 3 values, the model's input has 1 channels");
  EXPECT_HAS(fit_error("class_names", R"(["a", "b", "c"])"), "checkpoint metadata 'class_names' has 3 names, the model has 2 outputs");
}

TEST_F(CraftedCheckpoint, NonFiniteTensorsAreRefusedNamingTheTensor) {
  for (CheckpointUse use : {CheckpointUse::resume, CheckpointUse::inference}) {
    const fs::path nan = with_value("fc.weight", 3, std::nanf(""));
    EXPECT_HAS(error(nan, use), nan.string() + ": tensor 'fc.weight' holds nan at element 3");
    const fs::path inf = with_value("conv.bias", 1, std::numeric_limits<float>::infinity());
    EXPECT_HAS(error(inf, use), inf.string() + ": tensor 'conv.bias' holds inf at element 1");
    const fs::path var = with_value("bn.running_var", 0, -0.5f);
    EXPECT_HAS(error(var, use), var.string() + ": tensor 'bn.running_var' holds a negative variance");
    const fs::path mean = with_value("bn.running_mean", 0, -std::numeric_limits<float>::infinity());
    EXPECT_HAS(error(mean, use), "tensor 'bn.running_mean' holds -inf");
  }
  // A negative running mean is fine.
  read_run_checkpoint(with_value("bn.running_mean", 0, -0.5f), CheckpointUse::inference);
}

// ---- the same cases through the binary: exit 1, never a signal or an internal error ----

}  // namespace
}  // namespace convoy
