// `convoy infer --output json|jsonl|csv [--logits] [--output-file F]`: what scripts read back. The
// JSON and JSON lines parse (nlohmann), the CSV parses with Python's csv module (an independent
// reader, quoting included); each image's probabilities sum to 1 and are the softmax of its
// --logits, the logits are the engine's own for the same pixels, the formats agree value for value,
// and the options that cannot work together are refused with one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "interchange/torch_fixture.h"
#include "run_command.h"
#include "temp_dir.h"
#include "datasets/image_codec.h"
#include "engine/backends/backend.h"
#include "engine/bundle/loaded_model.h"
#include "engine/bundle/predict.h"
#include "engine/bundle/run_checkpoint.h"
#include "engine/graph/model.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::CommandResult;
using testing::run_command;

// Class names a CSV writer must quote (a comma, a quote) and JSON must escape.
const std::vector<std::string> kClasses = {"T-shirt, top", "Trouser", "Pull\"over\"", "Dress", "Coat",
                                           "Sandal",       "Shirt",   "Sneaker",      "Bag",   "Ankle boot"};

class InferOutput : public ::testing::Test {
 protected:
  void SetUp() override {
    // LeNet-5 as initialized (seed 3): any weights do, the test compares the engine with itself.
    const std::string yaml = Model::read_file(std::string(CONVOY_SOURCE_DIR) + "/models/lenet5.yaml");
    Model model = Model::from_yaml(yaml, "lenet5.yaml", 3);
    RunCheckpointInfo info;
    info.model_yaml = yaml;
    info.class_names = kClasses;
    info.input_shape = model.input_shape();
    info.mean = {0.3};
    info.std = {0.35};
    save_run_checkpoint(ckpt_, model, {}, info);
    for (int i = 0; i < 3; ++i) {  // 28x28 gray: no resizing, so the engine sees these very pixels
      std::vector<uint8_t> px(28 * 28);
      for (size_t p = 0; p < px.size(); ++p) px[p] = static_cast<uint8_t>((p * (7 + 13 * i) + 31 * i) % 256);
      const std::vector<uint8_t> png = encode_png(px.data(), 28, 28, 1);
      const fs::path file = dir_ / ("img" + std::to_string(i) + ".png");
      std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(png.data()), png.size());
      images_.push_back(file.string());
      pixels_.insert(pixels_.end(), px.begin(), px.end());
    }
  }
  // convoy infer on the three images; stdout only (stderr to a file, shown on failure).
  CommandResult infer(const std::string& args) const {
    std::string command = std::string(CONVOY_BINARY) + " infer --device cpu --model " + ckpt_.string() + " " + args;
    for (const std::string& f : images_) command += " " + f;
    CommandResult r = run_command(command + " 2>" + (dir_ / "stderr.txt").string());
    if (r.status != 0) {
      std::ifstream err(dir_ / "stderr.txt");
      r.output += std::string(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
    }
    return r;
  }
  // The engine's logits (3, 10) for the same pixels, layer by layer.
  std::vector<float> engine_logits() const {
    const std::unique_ptr<Backend> cpu = make_cpu_backend({});
    LoadedModel loaded = load_model(ckpt_.string(), *cpu, false);
    Tensor images = Tensor::empty({3, 1, 28, 28}, DType::u8);
    std::copy(pixels_.begin(), pixels_.end(), images.data<uint8_t>());
    return predict(loaded.model, *cpu, images, loaded.normalize).logits;
  }
  testing::TempDir dir_{"convoy-infer-output"};
  fs::path ckpt_ = dir_ / "model.safetensors";
  std::vector<std::string> images_;
  std::vector<uint8_t> pixels_;  // (3, 1, 28, 28)
};

// One image's record: the top-k (label, index, probability) and the logits, whatever the format.
struct Record {
  std::string file;
  std::vector<std::tuple<std::string, int, double>> top;
  std::vector<double> logits;
};

Record from_json(const json& j) {
  Record r;
  r.file = j.at("file").get<std::string>();
  for (const json& t : j.at("top_k"))
    r.top.emplace_back(t.at("label").get<std::string>(), t.at("index").get<int>(), t.at("probability").get<double>());
  if (j.contains("logits"))
    for (const json& x : j.at("logits")) r.logits.push_back(x.get<double>());
  return r;
}

// Every class in the top-k: probabilities in order, summing to 1, the softmax (in float64) of the
// logits, which are the engine's; labels as the checkpoint names the indices.
void expect_consistent(const Record& r, const std::vector<float>& engine, size_t image) {
  SCOPED_TRACE(r.file);
  ASSERT_EQ(r.top.size(), kClasses.size());
  ASSERT_EQ(r.logits.size(), kClasses.size());
  double top = -1e300, sum_exp = 0, sum = 0, scale = 0, diff = 0;
  for (double x : r.logits) top = std::max(top, x);
  for (double x : r.logits) sum_exp += std::exp(x - top);
  for (size_t c = 0; c < kClasses.size(); ++c) {
    scale = std::max(scale, std::abs(double{engine[image * 10 + c]}));
    diff = std::max(diff, std::abs(r.logits[c] - engine[image * 10 + c]));
  }
  EXPECT_LE(diff / scale, 1e-4) << "--logits vs the engine's layer-by-layer forward";
  for (size_t i = 0; i < r.top.size(); ++i) {
    const auto& [label, index, p] = r.top[i];
    ASSERT_TRUE(index >= 0 && index < 10);
    EXPECT_EQ(label, kClasses[static_cast<size_t>(index)]);
    if (i) {
      EXPECT_LE(p, std::get<2>(r.top[i - 1]));
    }
    EXPECT_NEAR(p, std::exp(r.logits[static_cast<size_t>(index)] - top) / sum_exp, 1e-6);
    sum += p;
  }
  EXPECT_NEAR(sum, 1.0, 1e-5);
}

TEST_F(InferOutput, JsonJsonLinesAndCsvParseBackAndAgree) {
  const std::vector<float> engine = engine_logits();
  // JSON: one array, an object per image in the order given.
  CommandResult r = infer("--output json --logits -k 10");
  ASSERT_EQ(r.status, 0) << r.output;
  const json doc = json::parse(r.output);
  ASSERT_TRUE(doc.is_array());
  ASSERT_EQ(doc.size(), 3u);
  std::vector<Record> from_array;
  for (size_t i = 0; i < 3; ++i) {
    from_array.push_back(from_json(doc[i]));
    EXPECT_EQ(from_array[i].file, images_[i]);
    expect_consistent(from_array[i], engine, i);
  }
  // Full precision (nine significant digits, which read back to the very float), not three decimals.
  EXPECT_TRUE(std::regex_search(r.output, std::regex("\"probability\": 0\\.[0-9]{6,}"))) << r.output;

  // JSON lines: the same records, one a line.
  r = infer("--output jsonl --logits -k 10");
  ASSERT_EQ(r.status, 0) << r.output;
  std::istringstream lines(r.output);
  size_t n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    ASSERT_LT(n, 3u);
    const Record rec = from_json(json::parse(line));
    EXPECT_EQ(rec.top, from_array[n].top);
    EXPECT_EQ(rec.logits, from_array[n].logits);
  }
  EXPECT_EQ(n, 3u);

  // CSV into a file, read by Python's csv module: the header, a row per image, the same numbers.
  const fs::path csv = dir_ / "out.csv";
  r = infer("--output csv --logits -k 10 --output-file " + csv.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "");  // nothing on stdout
  r = run_command(testing::torch_python() + " -c \"import csv, json, sys; print(json.dumps(list(csv.reader(open(sys.argv[1], "
                  "newline='')))))\" " + csv.string() + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  const json rows = json::parse(r.output);
  ASSERT_EQ(rows.size(), 4u);
  const auto header = rows[0].get<std::vector<std::string>>();
  ASSERT_EQ(header.size(), 1u + 3 * 10 + 10);
  EXPECT_EQ(header[0], "file");
  EXPECT_EQ(header[1], "top1_label");
  EXPECT_EQ(header[3], "top1_probability");
  EXPECT_EQ(header[30], "top10_probability");
  EXPECT_EQ(header[31], "logit_0");
  for (size_t i = 0; i < 3; ++i) {
    const auto row = rows[i + 1].get<std::vector<std::string>>();
    ASSERT_EQ(row.size(), header.size());
    Record rec;
    rec.file = row[0];
    for (size_t k = 0; k < 10; ++k)
      rec.top.emplace_back(row[1 + 3 * k], std::stoi(row[2 + 3 * k]), std::stod(row[3 + 3 * k]));
    for (size_t c = 0; c < 10; ++c) rec.logits.push_back(std::stod(row[31 + c]));
    EXPECT_EQ(rec.file, images_[i]);
    EXPECT_EQ(rec.top, from_array[i].top);  // the quoted labels came back whole
    EXPECT_EQ(rec.logits, from_array[i].logits);
    expect_consistent(rec, engine, i);
  }
}

TEST_F(InferOutput, TopKAndWithoutLogits) {
  CommandResult r = infer("--output json -k 2");
  ASSERT_EQ(r.status, 0) << r.output;
  const json doc = json::parse(r.output);
  ASSERT_EQ(doc.size(), 3u);
  for (const json& j : doc) {
    EXPECT_EQ(j.at("top_k").size(), 2u);
    EXPECT_FALSE(j.contains("logits"));
  }
  r = infer("--output csv -k 2");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.substr(0, r.output.find('\n')),
            "file,top1_label,top1_index,top1_probability,top2_label,top2_index,top2_probability");
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 4);
  // Text, as before: the top-k at three decimals.
  r = infer("-k 2");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(images_[0] + ": "), std::string::npos) << r.output;
}

TEST_F(InferOutput, OptionsThatCannotWorkTogetherAreRefused) {
  CommandResult r = infer("--logits");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("--logits: the text output shows the top-k only"), std::string::npos) << r.output;
  r = run_command(std::string(CONVOY_BINARY) + " infer --device cpu --model " + ckpt_.string() +
                  " --data fashion-mnist:test --output json 2>&1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("are for image files"), std::string::npos) << r.output;
  r = infer("--output yaml");
  EXPECT_EQ(r.status, 2) << r.output;
  // A target that is not a regular file is refused before any work, with its name.
  r = infer("--output json --output-file " + dir_.path().string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(dir_.path().string()), std::string::npos) << r.output;
}

}  // namespace
}  // namespace convoy
