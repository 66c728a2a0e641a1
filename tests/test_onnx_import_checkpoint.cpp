// `convoy import` writes a Convoy checkpoint that `convoy infer`, `export`, `serve` and
// `train --init-weights` take as it is: the ONNX metadata_props that `convoy export` writes
// (class_names, mean, std, preprocess) come back into it; without them the defaults are said in a
// line each and --class-names, --mean and --std set them; the imported model's logits are the
// original's through infer and through serve. No Python needed: export and import are Convoy's.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "run_command.h"
#include "temp_dir.h"
#include "datasets/image_codec.h"
#include "engine/backends/backend.h"
#include "engine/bundle/run_checkpoint.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/graph/load_weights.h"
#include "engine/graph/model.h"
#include "tests/serve/serve_harness.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::CommandResult;

const std::string kLenet = std::string(CONVOY_SOURCE_DIR) + "/models/lenet5.yaml";

CommandResult convoy(const std::string& args) {
  return testing::run_command(std::string(CONVOY_BINARY) + " " + args + " 2>&1");
}

double max_relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / scale;
}

class OnnxImport : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef CONVOY_HAVE_ONNX
    GTEST_SKIP() << "built without ONNX (CONVOY_ONNX=OFF, or libonnx-dev/libprotobuf-dev missing)";
#endif
    std::vector<uint8_t> px(28 * 28);
    for (size_t p = 0; p < px.size(); ++p) px[p] = static_cast<uint8_t>((p * 37 + 11) % 256);
    pixels_ = px;
    const std::vector<uint8_t> png = encode_png(px.data(), 28, 28, 1);
    std::ofstream(image_, std::ios::binary).write(reinterpret_cast<const char*>(png.data()), png.size());
  }
  // `convoy infer --output json --logits` of the image: its logits, and its labels in class order.
  std::vector<double> infer_logits(const fs::path& checkpoint, std::vector<std::string>* labels = nullptr) {
    const CommandResult r = testing::run_command(std::string(CONVOY_BINARY) + " infer --device cpu --model " +
                                                 checkpoint.string() + " --output json --logits -k 100 " +
                                                 image_.string() + " 2>/dev/null");
    EXPECT_EQ(r.status, 0) << r.output;
    if (r.status != 0) return {};
    const json record = json::parse(r.output).at(0);
    if (labels) {
      labels->assign(record.at("logits").size(), "");
      for (const json& t : record.at("top_k")) (*labels)[t.at("index").get<size_t>()] = t.at("label").get<std::string>();
    }
    return record.at("logits").get<std::vector<double>>();
  }
  testing::TempDir dir_{"convoy-onnx-import"};
  fs::path image_ = dir_ / "image.png";
  std::vector<uint8_t> pixels_;  // (1, 28, 28)
};

// A trained-like checkpoint -> ONNX -> checkpoint: the metadata and the logits come back.
TEST_F(OnnxImport, ExportedMetadataComesBackIntoACheckpointThatInferExportAndInitWeightsTake) {
  const std::string yaml = Model::read_file(kLenet);
  Model model = Model::from_yaml(yaml, kLenet, 3);
  RunCheckpointInfo info;
  info.model_yaml = yaml;
  info.class_names = {"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine, ten"};
  info.input_shape = model.input_shape();
  info.mean = {0.25};
  info.std = {0.5};
  Preprocess p;
  p.channels = 1;
  p.height = p.width = 28;
  p.resize = 32;  // shorter side to 32, then the centre 28x28
  info.preprocess = p;
  const fs::path original = dir_ / "original.safetensors", onnx = dir_ / "m.onnx";
  save_run_checkpoint(original, model, {}, info);
  CommandResult r = convoy("export --model " + original.string() + " -o " + onnx.string());
  ASSERT_EQ(r.status, 0) << r.output;

  r = convoy("import " + onnx.string() + " -o " + (dir_ / "imported.yaml").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("none in"), std::string::npos) << r.output;  // nothing defaulted
  EXPECT_NE(r.output.find("checkpoint " + (dir_ / "imported.safetensors").string()), std::string::npos) << r.output;
  const fs::path imported = dir_ / "imported.safetensors";
  const auto want = read_safetensors(original).metadata, got = read_safetensors(imported).metadata;
  for (const char* key : {"class_names", "mean", "std", "preprocess", "input_shape"}) {
    ASSERT_TRUE(got.count(key)) << key;
    EXPECT_EQ(json::parse(got.at(key)), json::parse(want.at(key))) << key;
  }
  EXPECT_EQ(got.at("model_yaml"), Model::read_file((dir_ / "imported.yaml").string()));

  // infer: the same labels and logits as the original (resized to 32, centre 28x28, normalized).
  std::vector<std::string> labels_a, labels_b;
  const std::vector<double> a = infer_logits(original, &labels_a), b = infer_logits(imported, &labels_b);
  ASSERT_EQ(a.size(), 10u);
  EXPECT_LE(max_relative_difference(b, a), 1e-5);
  EXPECT_EQ(labels_b, labels_a);
  EXPECT_EQ(labels_b, info.class_names);

  // export takes it, and so does --init-weights (strictly: every tensor of the imported YAML's model).
  r = convoy("export --model " + imported.string() + " -o " + (dir_ / "again.onnx").string());
  ASSERT_EQ(r.status, 0) << r.output;
  Model from_yaml = Model::from_file((dir_ / "imported.yaml").string(), 9);
  const SafetensorsFile file = read_safetensors(imported, ForeignDtypes::skip);
  const WeightsLoadReport report = load_matching_weights(from_yaml, file.tensors, file.skipped, "", true, "imported");
  EXPECT_EQ(report.loaded.size(), from_yaml.state().size());
}

// An ONNX file without Convoy's metadata: defaults, each said; the flags set them; serve takes it.
TEST_F(OnnxImport, WithoutMetadataTheDefaultsAreSaidTheFlagsSetThemAndServeTakesIt) {
  const fs::path onnx = dir_ / "plain.onnx", ckpt = dir_ / "plain.safetensors";
  CommandResult r = convoy("export --model " + kLenet + " --seed 3 -o " + onnx.string());
  ASSERT_EQ(r.status, 0) << r.output;
  r = convoy("import " + onnx.string() + " -o " + (dir_ / "plain.yaml").string());
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* line : {"class names: none in", "the classes are named 0 ... 9", "normalization: no 'mean' or 'std'",
                           "preprocessing: none in", "resized whole to 28x28"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << " in " << r.output;
  const auto meta = read_safetensors(ckpt).metadata;
  EXPECT_EQ(json::parse(meta.at("class_names")), json({"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}));
  EXPECT_EQ(json::parse(meta.at("mean")), json({0.0}));
  EXPECT_EQ(json::parse(meta.at("std")), json({1.0}));

  // The logits are the model's own for pixels / 255 (mean 0, std 1), computed here layer by layer.
  Model model = Model::from_file(kLenet, 3);
  const std::unique_ptr<Backend> cpu = make_cpu_backend({});
  model.to(*cpu, DType::f32);
  std::vector<float> x(pixels_.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(pixels_[i] / 255.0);
  const std::vector<float> engine = model.forward(*cpu, Tensor::from_floats(x, {1, 1, 28, 28}), StepInfo{}).to_floats();
  const std::vector<double> infer = infer_logits(ckpt);
  EXPECT_LE(max_relative_difference(infer, std::vector<double>(engine.begin(), engine.end())), 1e-4);

  // serve takes the checkpoint as REPO/<model>/<version>/model.safetensors and answers the same logits.
  fs::create_directories(dir_ / "repo/imported/1");
  fs::copy_file(ckpt, dir_ / "repo/imported/1/model.safetensors");
  testing::write_text_file(dir_ / "repo/imported/config.yaml", "device: cpu\nmax_batch_size: 2\n");
  testing::ServerProcess server("--model-repository " + (dir_ / "repo").string(), dir_.path());
  if (!server.started() && server.log().find("built without Boost") != std::string::npos)
    GTEST_SKIP() << "this convoy has no serve: " << server.log();
  ASSERT_TRUE(server.started()) << server.log();
  const json request = {{"inputs", {{{"name", "input"}, {"shape", {1, 1, 28, 28}}, {"datatype", "UINT8"}, {"data", pixels_}}}}};
  testing::write_text_file(dir_ / "request.json", request.dump());
  const testing::HttpResult reply = testing::http("POST", server.url("/v2/models/imported/infer"),
                                                  "--data-binary @" + (dir_ / "request.json").string(), dir_.path());
  ASSERT_EQ(reply.status, 200) << reply.body;
  std::vector<double> served;
  const json answer = json::parse(reply.body);
  for (const json& o : answer.at("outputs"))
    if (o.at("name") == "logits") served = o.at("data").get<std::vector<double>>();
  ASSERT_EQ(served.size(), 10u) << reply.body;
  EXPECT_LE(max_relative_difference(served, infer), 1e-4);
  server.stop();

  // The flags: class names from a file, the normalization given.
  testing::write_text_file(dir_ / "names.txt", "zero\none\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\n");
  r = convoy("import " + onnx.string() + " -o " + (dir_ / "named.yaml").string() + " --class-names " +
             (dir_ / "names.txt").string() + " --mean 0.5 --std 0.25");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("class names: none"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("normalization:"), std::string::npos) << r.output;
  const auto named = read_safetensors(dir_ / "named.safetensors").metadata;
  EXPECT_EQ(json::parse(named.at("class_names")).at(9), "nine");
  EXPECT_EQ(json::parse(named.at("mean")), json({0.5}));
  EXPECT_EQ(json::parse(named.at("std")), json({0.25}));

  // Flags that do not fit the model: one line naming the key, and no file written.
  testing::write_text_file(dir_ / "three.txt", "a\nb\nc\n");
  r = convoy("import " + onnx.string() + " -o " + (dir_ / "bad.yaml").string() + " --class-names " +
             (dir_ / "three.txt").string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("'class_names' has 3 names, the model has 10 outputs"), std::string::npos) << r.output;
  r = convoy("import " + onnx.string() + " -o " + (dir_ / "bad.yaml").string() + " --std 0");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("'std'"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "bad.yaml"));
  EXPECT_FALSE(fs::exists(dir_ / "bad.safetensors"));
}

}  // namespace
}  // namespace convoy
