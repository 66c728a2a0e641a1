// Image datasets end to end: image folders of JPEG/PNG files and CIFAR binaries written by the
// tests, trained and served through the `convoy` binary on the CPU. Inference must preprocess
// exactly as evaluation does; the loader must be deterministic for any number of workers;
// unreadable images fail or are skipped as configured. The slow accuracy case is in
// test_image_datasets_slow_e2e.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/image_codec.h"
#include "datasets/loader.h"
#include "datasets/preprocess.h"
#include "engine/backends/backend.h"
#include "engine/bundle/run_checkpoint.h"
#include "engine/core/file_io.h"
#include "engine/graph/model.h"
#include "run_command.h"
#include "temp_dir.h"

using convoy::testing::write_file;

namespace {

namespace fs = std::filesystem;
using Result = convoy::testing::CommandResult;

Result run(const std::string& args) {
  return convoy::testing::run_command(std::string(CONVOY_BINARY) + " " + args + " 2>&1");
}

std::vector<uint8_t> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Class colours far apart, so a tiny model learns them in a few steps.
constexpr uint8_t kColours[][3] = {{200, 40, 40}, {40, 190, 50}, {40, 60, 210}, {200, 200, 40}};

// (height, width, 3) u8: the class colour with a diagonal gradient and a pseudo-random texture,
// so that different crops of one image give different pixels.
std::vector<uint8_t> textured_pixels(int cls, int64_t width, int64_t height, uint32_t seed) {
  std::vector<uint8_t> px(static_cast<size_t>(width * height * 3));
  uint32_t state = seed * 2654435761u + 1;
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x) {
      state = state * 1664525u + 1013904223u;
      const int noise = static_cast<int>((state >> 24) % 41) - 20;
      const int ramp = static_cast<int>((x * 40) / width + (y * 30) / height) - 35;
      for (int c = 0; c < 3; ++c) {
        const int v = kColours[cls][c] + noise + ramp;
        px[static_cast<size_t>((y * width + x) * 3 + c)] = static_cast<uint8_t>(std::clamp(v, 0, 255));
      }
    }
  return px;
}

// Sizes that differ in aspect and scale: the resize and centre crop matter.
constexpr int64_t kSizes[][2] = {{30, 40}, {50, 30}, {28, 28}, {64, 36}, {33, 47}, {40, 90}};

// ROOT/<split>/<class>/<nn>.{jpg,png}: `per_class` images per class, every third one a PNG.
void write_colour_split(const fs::path& root, const std::string& split, const std::vector<std::string>& classes,
                        int per_class, uint32_t seed) {
  for (size_t c = 0; c < classes.size(); ++c)
    for (int i = 0; i < per_class; ++i) {
      const auto [w, h] = std::pair(kSizes[(i + c) % 6][0], kSizes[(i + c) % 6][1]);
      const auto px = textured_pixels(static_cast<int>(c), w, h, seed + static_cast<uint32_t>(c * 1000 + i));
      const bool png = i % 3 == 2;
      const auto bytes = png ? convoy::encode_png(px.data(), w, h, 3) : convoy::encode_jpeg(px.data(), w, h, 3, 90);
      char name[32];
      std::snprintf(name, sizeof name, "%02d.%s", i, png ? "png" : "jpg");
      write_file(root / split / classes[c] / name, bytes);
    }
}

const std::vector<std::string> kClasses = {"blue_ish", "green_ish", "red_ish"};

// A small colour model: a conv, ReLU, global average pool, linear to the classes.
std::string tiny_model_yaml(int64_t classes, int64_t side) {
  return "name: tiny_colour\ninput: [3, " + std::to_string(side) + ", " + std::to_string(side) +
         "]\nlayers:\n"
         "  - {name: conv, type: conv2d, out_channels: 8, kernel: 3, padding: 1}\n"
         "  - {type: relu}\n"
         "  - {type: global_avg_pool}\n"
         "  - {name: fc, type: linear, out_features: " + std::to_string(classes) + "}\n";
}

class ImageDatasetsE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = dir_ / "tiny.yaml";
    std::ofstream(model_) << tiny_model_yaml(3, 24);
  }
  // A run config for an image folder at `root`; `extra` goes into the dataset map.
  fs::path config(const std::string& name, const fs::path& root, const std::string& extra = "",
                  const std::string& top = "epochs: 1\nbatch_size: 8\n") const {
    const fs::path path = dir_ / (name + ".yaml");
    std::ofstream(path) << "name: " << name << "\nmodel: " << model_.string()
                        << "\ndataset:\n  kind: image-folder\n  path: " << root.string()
                        << "\n  test_split: val\n  resize: 28\n"
                           "  normalize: {mean: [0.45, 0.45, 0.45], std: [0.25, 0.25, 0.25]}\n"
                        << extra << top
                        << "optimizer: {type: sgd, lr: 0.05, momentum: 0.9}\nseed: 3\ndevice: cpu\nthreads: 1\n"
                           "output: {dir: "
                        << (dir_ / "runs").string() << "}\n";
    return path;
  }
  convoy::testing::TempDir dir_{"convoy-img-e2e"};
  fs::path model_;
};

// "<path>: <class> 0.123, ..." lines of `convoy infer` on files: path -> top-1 class name.
std::map<std::string, std::string> top1_of(const std::string& output) {
  std::map<std::string, std::string> top1;
  static const std::regex line("^(.+): (\\S+) [01]\\.[0-9]{3}");
  std::istringstream in(output);
  std::string l;
  std::smatch m;
  while (std::getline(in, l))
    if (std::regex_search(l, m, line)) top1[m[1]] = m[2];
  return top1;
}

// What the checkpoint predicts for `file`, computed here: decode_preprocess in eval mode with
// the checkpoint's preprocessing, normalization by hand, a forward pass, the argmax.
class InProcessModel {
 public:
  explicit InProcessModel(const fs::path& checkpoint)
      : backend_(convoy::make_cpu_backend({})),
        ckpt_(convoy::read_run_checkpoint(checkpoint, convoy::CheckpointUse::inference)),
        model_(convoy::Model::from_yaml(ckpt_.info.model_yaml, "in-process", 0)) {
    model_.load_state(ckpt_.tensors, checkpoint.string());
    model_.to(*backend_, convoy::DType::f32);
  }
  const convoy::RunCheckpointInfo& info() const { return ckpt_.info; }

  int32_t predict(const fs::path& file) {
    const convoy::Preprocess& p = *ckpt_.info.preprocess;
    const auto bytes = read_bytes(file);
    std::vector<uint8_t> u8(static_cast<size_t>(p.channels * p.height * p.width));
    convoy::decode_preprocess(bytes, file.string(), p, convoy::SampleMode::eval, 0, u8.data());
    std::vector<float> x(u8.size());
    const int64_t plane = p.height * p.width;
    for (size_t i = 0; i < u8.size(); ++i) {
      const size_t c = i / static_cast<size_t>(plane);
      const size_t from = ckpt_.info.mean.size() == 1 ? 0 : c;
      x[i] = static_cast<float>((u8[i] / 255.0 - ckpt_.info.mean[from]) / ckpt_.info.std[from]);
    }
    const convoy::Tensor input = backend_->upload(convoy::Tensor::from_floats(x, {1, p.channels, p.height, p.width}));
    const std::vector<float> logits = model_.forward(*backend_, input, convoy::StepInfo{}).to_floats();
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }

 private:
  std::unique_ptr<convoy::Backend> backend_;
  convoy::RunCheckpoint ckpt_;
  convoy::Model model_;
};

// 2. `convoy infer` on files preprocesses as training's evaluation did: file by file, in
// batches, over --data, and computed in-process, the top-1 classes agree.
TEST_F(ImageDatasetsE2E, InferOnFilesMatchesEvaluationPreprocessing) {
  const fs::path root = dir_ / "colours";
  write_colour_split(root, "train", kClasses, 12, 1);
  write_colour_split(root, "val", kClasses, 5, 2);
  const Result train = run("train --config " + config("colour", root, "", "epochs: 6\nbatch_size: 6\n").string());
  ASSERT_EQ(train.status, 0) << train.output;
  const fs::path best = dir_ / "runs/colour/best.safetensors";
  ASSERT_TRUE(fs::exists(best)) << train.output;

  InProcessModel in_process(best);
  ASSERT_TRUE(in_process.info().preprocess.has_value());
  const convoy::Preprocess& p = *in_process.info().preprocess;
  EXPECT_EQ(p.resize, 28);
  EXPECT_EQ(p.channels, 3);
  EXPECT_EQ(p.height, 24);
  EXPECT_EQ(p.width, 24);
  EXPECT_EQ(in_process.info().class_names, kClasses);

  // --data: the dataset's order.
  const fs::path preds = dir_ / "preds.txt";
  const Result data = run("infer --device cpu --model " + best.string() + " --data image-folder:val --data-path " +
                          root.string() + " --predictions " + preds.string());
  ASSERT_EQ(data.status, 0) << data.output;
  EXPECT_NE(data.output.find("image-folder:val: 15 images, accuracy"), std::string::npos) << data.output;
  std::vector<int32_t> data_top1;
  {
    std::ifstream in(preds);
    for (int32_t v; in >> v;) data_top1.push_back(v);
  }
  const auto val = convoy::load_image_folder(root, "val");
  ASSERT_EQ(data_top1.size(), val->samples().size());

  // Files: the folder in batches of 4 over 3 workers (a partial last batch), then the default.
  for (const std::string flags : {" --batch-size 4 --workers 3", ""}) {
    const Result files = run("infer --device cpu -k 2 --model " + best.string() + flags + " " + (root / "val").string());
    ASSERT_EQ(files.status, 0) << files.output;
    const auto top1 = top1_of(files.output);
    ASSERT_EQ(top1.size(), val->samples().size()) << files.output;
    for (size_t i = 0; i < val->samples().size(); ++i) {
      const std::string path = val->samples()[i].path.string();
      ASSERT_TRUE(top1.count(path)) << path << " missing from\n" << files.output;
      EXPECT_EQ(top1.at(path), kClasses[static_cast<size_t>(data_top1[i])]) << path << flags;
    }
  }

  // In-process, sample by sample; and the model learned the colours (so the agreement above
  // is over varied predictions, not one class everywhere).
  int correct = 0;
  std::set<int32_t> predicted;
  for (size_t i = 0; i < val->samples().size(); ++i) {
    const int32_t mine = in_process.predict(val->samples()[i].path);
    EXPECT_EQ(mine, data_top1[i]) << val->samples()[i].path;
    predicted.insert(mine);
    correct += mine == val->samples()[i].label;
  }
  EXPECT_EQ(predicted.size(), kClasses.size());
  EXPECT_GE(correct, 12) << "of 15";

  // One file on its own.
  const fs::path one = val->samples()[7].path;
  const Result single = run("infer --device cpu --model " + best.string() + " " + one.string());
  ASSERT_EQ(single.status, 0) << single.output;
  const auto single_top1 = top1_of(single.output);
  ASSERT_EQ(single_top1.size(), 1u) << single.output;
  EXPECT_EQ(single_top1.at(one.string()), kClasses[static_cast<size_t>(data_top1[7])]) << single.output;

  // A folder without images, and a corrupt JPEG: exit 1 naming it.
  const fs::path empty = dir_ / "no_images";
  fs::create_directories(empty / "sub");
  std::ofstream(empty / "notes.txt") << "no pictures here\n";
  Result r = run("infer --device cpu --model " + best.string() + " " + empty.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(empty.string() + ": no .jpg, .jpeg or .png images"), std::string::npos) << r.output;

  const fs::path corrupt = dir_ / "corrupt.jpg";
  {
    auto bytes = read_bytes(val->samples()[0].path.extension() == ".jpg" ? val->samples()[0].path
                                                                          : val->samples()[1].path);
    bytes.resize(bytes.size() / 2);
    write_file(corrupt, bytes);
  }
  r = run("infer --device cpu --model " + best.string() + " " + corrupt.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(corrupt.string()), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
}

// Every batch of an epoch, images and labels, as bytes.
std::vector<std::vector<uint8_t>> epoch_batches(convoy::DataLoader& loader, int64_t epoch) {
  std::vector<std::vector<uint8_t>> batches;
  loader.start_epoch(epoch);
  convoy::Batch batch;
  while (loader.next(batch)) {
    const auto* img = batch.images.data<uint8_t>();
    std::vector<uint8_t> bytes(img, img + batch.images.numel());
    const auto* lab = reinterpret_cast<const uint8_t*>(batch.labels.data<int32_t>());
    bytes.insert(bytes.end(), lab, lab + batch.labels.numel() * 4);
    batches.push_back(std::move(bytes));
  }
  return batches;
}

// 3. Real JPEG/PNG decoding and random resized crops: the same batches for 1 and 4 workers.
TEST_F(ImageDatasetsE2E, LoaderIsDeterministicAcrossWorkersWithRandomCrops) {
  const fs::path root = dir_ / "colours";
  write_colour_split(root, "train", kClasses, 10, 5);
  const auto data = convoy::load_image_folder(root, "train");
  ASSERT_EQ(data->size(), 30);

  convoy::LoaderOptions o;
  o.batch_size = 7;
  o.drop_last = false;
  o.seed = 11;
  o.preprocess.channels = 3;
  o.preprocess.height = 20;
  o.preprocess.width = 20;
  o.preprocess.resize = 24;
  o.preprocess.random_resized_crop = true;
  o.preprocess.scale_min = 0.3;
  const auto batches = [&](convoy::SampleMode mode, bool shuffle, int64_t workers, int64_t epoch) {
    convoy::LoaderOptions w = o;
    w.mode = mode;
    w.shuffle = shuffle;
    w.workers = workers;
    convoy::DataLoader loader(*data, w);
    return epoch_batches(loader, epoch);
  };
  using convoy::SampleMode;
  for (int64_t epoch : {0, 1}) {
    const auto one = batches(SampleMode::train, true, 1, epoch);
    ASSERT_EQ(one.size(), 5u);  // 4 x 7 + 2
    EXPECT_EQ(one, batches(SampleMode::train, true, 4, epoch)) << "epoch " << epoch;
  }
  // In train mode the crops change from epoch to epoch (the order held fixed), nearly every
  // sample's; in eval mode nothing does.
  const auto train0 = batches(SampleMode::train, false, 2, 0);
  const auto train1 = batches(SampleMode::train, false, 2, 1);
  ASSERT_EQ(train0.size(), train1.size());
  const size_t sample_bytes = 3 * 20 * 20;
  int differ = 0, samples = 0;
  for (size_t b = 0; b < train0.size(); ++b)
    for (size_t s = 0; s < train0[b].size() / (sample_bytes + 4); ++s) {  // images, then 4-byte labels
      ++samples;
      differ += !std::equal(train0[b].begin() + static_cast<std::ptrdiff_t>(s * sample_bytes),
                            train0[b].begin() + static_cast<std::ptrdiff_t>((s + 1) * sample_bytes),
                            train1[b].begin() + static_cast<std::ptrdiff_t>(s * sample_bytes));
    }
  EXPECT_EQ(samples, 30);
  EXPECT_GE(differ, 28) << "of " << samples << " samples cropped differently in epoch 1";
  const auto eval0 = batches(SampleMode::eval, false, 1, 0);
  EXPECT_EQ(eval0, batches(SampleMode::eval, false, 4, 1));
  EXPECT_NE(eval0, train0);  // the random crop is on in train mode only
}

// 4. on_bad_image: fail (the default) names the file; skip trains and reports the count.
TEST_F(ImageDatasetsE2E, BadImagesFailOrAreSkippedAsConfigured) {
  const fs::path root = dir_ / "bad";
  write_colour_split(root, "train", kClasses, 8, 7);
  write_colour_split(root, "val", kClasses, 4, 8);
  const fs::path truncated = root / "train" / kClasses[0] / "truncated.jpg";
  {
    auto bytes = read_bytes(root / "train" / kClasses[0] / "00.jpg");
    bytes.resize(bytes.size() / 2);
    write_file(truncated, bytes);
  }
  // Only the truncated JPEG: the failure names it.
  Result r = run("train --config " + config("fail_jpg", root).string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(truncated.string()), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;

  // And a text file named like a PNG.
  fs::remove(truncated);
  const fs::path text_png = root / "train" / kClasses[1] / "x.png";
  std::ofstream(text_png) << "this is not an image\n";
  r = run("train --config " + config("fail_png", root).string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(text_png.string()), std::string::npos) << r.output;

  // Skip: 24 + 2 bad training images at batch 13 (no partial batch dropped), 12 + 1 bad in val.
  {
    auto bytes = read_bytes(root / "train" / kClasses[0] / "00.jpg");
    bytes.resize(bytes.size() / 2);
    write_file(truncated, bytes);
  }
  std::ofstream(root / "val" / kClasses[2] / "y.jpg") << "neither is this\n";
  r = run("train --config " + config("skip", root, "  on_bad_image: skip\n", "epochs: 2\nbatch_size: 13\n").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir_ / "runs/skip/last.safetensors")) << r.output;
  // Once per epoch, after the epoch's line.
  const std::string skipped = "skipped unreadable images (on_bad_image: skip): 2 in training, 1 in evaluation";
  const size_t first = r.output.find(skipped);
  ASSERT_NE(first, std::string::npos) << r.output;
  EXPECT_NE(r.output.find(skipped, first + 1), std::string::npos) << r.output;
  EXPECT_LT(r.output.find("epoch 1/2: train loss"), first) << r.output;
  const std::string csv = read_text(dir_ / "runs/skip/metrics.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3) << csv;
}

TEST_F(ImageDatasetsE2E, EmptyClassAndMismatchedSplitsAreClearErrors) {
  const fs::path root = dir_ / "classes";
  write_colour_split(root, "train", kClasses, 3, 9);
  write_colour_split(root, "val", kClasses, 2, 10);
  const fs::path empty = root / "train" / "zz_empty";
  fs::create_directories(empty);
  std::ofstream(empty / "readme.txt") << "no images\n";
  Result r = run("train --config " + config("empty", root).string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(empty.string()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("class 'zz_empty' has no images"), std::string::npos) << r.output;
  fs::remove_all(empty);

  // The same number of classes, one name different.
  fs::rename(root / "val" / kClasses[2], root / "val" / "purple_ish");
  r = run("train --config " + config("mismatch", root).string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("image-folder:train and image-folder:val have different classes"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("'red_ish' in image-folder:train but 'purple_ish' in image-folder:val"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
}

// 5. CIFAR-10's binary format written here: a label byte then 3 x 32 x 32 planes per record.
// torchvision's and ImageNet's layout, ROOT/train and ROOT/val, trains without a test_split key:
// the run evaluates on val and says so; a folder with neither test/ nor val/ still names test/.
TEST_F(ImageDatasetsE2E, TorchvisionLayoutEvaluatesOnValWithoutATestSplitKey) {
  const fs::path root = dir_.path() / "tv";
  write_colour_split(root, "train", kClasses, 4, 1);
  write_colour_split(root, "val", kClasses, 2, 2);
  const fs::path cfg = dir_.path() / "tv.yaml";
  auto write_config = [&](const fs::path& data) {
    std::ofstream(cfg) << "name: tv\nmodel: " << model_.string() << "\ndataset:\n  kind: image-folder\n  path: "
                       << data.string() << "\n  resize: 28\n  normalize: {mean: [0.45], std: [0.25]}\n"
                       << "epochs: 1\nbatch_size: 4\noptimizer: {type: sgd, lr: 0.05}\ndevice: cpu\nthreads: 1\n"
                       << "output: {dir: " << (dir_.path() / "runs").string() << "}\n";
  };
  write_config(root);
  Result r = run("train --config " + cfg.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("has val/ and no test/ (torchvision's layout): evaluating on val"), std::string::npos) << r.output;
  const fs::path lone = dir_.path() / "lone";
  write_colour_split(lone, "train", kClasses, 2, 3);
  write_config(lone);
  r = run("train --config " + cfg.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("test"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("evaluating on val"), std::string::npos) << r.output;
}

TEST_F(ImageDatasetsE2E, TrainsOnCifar10BinariesAndKeepsTheirClassNames) {
  const std::vector<std::string> names = {"airplane", "automobile", "bird", "cat", "deer",
                                          "dog", "frog", "horse", "ship", "truck"};
  const fs::path cifar = dir_ / "cifar";
  fs::create_directories(cifar);
  {
    std::ofstream meta(cifar / "batches.meta.txt");
    for (const auto& n : names) meta << n << "\n";
    meta << "\n";  // the official file ends with a blank line
  }
  uint32_t state = 17;
  const auto write_batch = [&](const std::string& file, int records) {
    std::vector<uint8_t> bytes;
    for (int i = 0; i < records; ++i) {
      const int label = (i * 7 + static_cast<int>(file.size())) % 10;
      bytes.push_back(static_cast<uint8_t>(label));
      for (int c = 0; c < 3; ++c)
        for (int p = 0; p < 32 * 32; ++p) {
          state = state * 1664525u + 1013904223u;
          const int base = ((label >> c) & 1) * 150 + (label % 3) * 30 + 20;  // class-dependent colour
          bytes.push_back(static_cast<uint8_t>(std::clamp(base + static_cast<int>((state >> 24) % 31) - 15, 0, 255)));
        }
    }
    write_file(cifar / file, bytes);
  };
  for (int b = 1; b <= 5; ++b) write_batch("data_batch_" + std::to_string(b) + ".bin", 64);
  write_batch("test_batch.bin", 100);

  const fs::path model = dir_ / "tiny32.yaml";
  std::ofstream(model) << tiny_model_yaml(10, 32);
  const fs::path cfg = dir_ / "cifar.yaml";
  std::ofstream(cfg) << "name: cifar\nmodel: " << model.string() << "\ndataset:\n  kind: cifar10\n  path: "
                     << cifar.string()
                     << "\n  normalize: {mean: [0.4914, 0.4822, 0.4465], std: [0.2470, 0.2435, 0.2616]}\n"
                        "  augment: {crop_padding: 4, horizontal_flip: true}\n"
                        "epochs: 1\nbatch_size: 32\noptimizer: {type: sgd, lr: 0.05, momentum: 0.9}\n"
                        "device: cpu\noutput: {dir: "
                     << (dir_ / "runs").string() << "}\n";
  const Result r = run("train --config " + cfg.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("320 training images (cifar10:train)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("epoch 1/1: train loss"), std::string::npos) << r.output;
  const auto ckpt = convoy::read_run_checkpoint(dir_ / "runs/cifar/best.safetensors", convoy::CheckpointUse::inference);
  EXPECT_EQ(ckpt.info.class_names, names);
  ASSERT_TRUE(ckpt.info.preprocess.has_value());
  EXPECT_EQ(ckpt.info.preprocess->channels, 3);
  EXPECT_EQ(ckpt.info.preprocess->height, 32);
  EXPECT_TRUE(ckpt.info.horizontal_flip);
  EXPECT_EQ(ckpt.info.crop_padding, 4);

  // The class names are the file's: another list comes through as written.
  std::vector<std::string> renamed = names;
  renamed[0] = "plane";
  {
    std::ofstream meta(cifar / "batches.meta.txt");
    for (const auto& n : renamed) meta << n << "\n";
  }
  const Result again = run("train --config " + cfg.string() + " --set name=cifar2");
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_EQ(convoy::read_run_checkpoint(dir_ / "runs/cifar2/best.safetensors", convoy::CheckpointUse::inference)
                .info.class_names,
            renamed);
}

}  // namespace
