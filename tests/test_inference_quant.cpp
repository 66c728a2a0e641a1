// Reduced precision in the CPU inference plan: int8 post-training quantization (`convoy
// quantize`, the ranges in the checkpoint, int8 plans) and bf16, on a LeNet-5 trained for a
// short while on the real Fashion-MNIST, against its fp32 plan; and the refusals.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <random>
#include <regex>
#include <string>

#include "datasets/dataset.h"
#include "datasets/loader.h"
#include "engine/backends/backend.h"
#include "engine/bundle/run_checkpoint.h"
#include "engine/inference/inference_plan.h"
#include "engine/inference/quantize.h"
#include "engine/bundle/evaluate.h"
#include "tests/run_command.h"
#include "tests/temp_dir.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;
const std::string kConfig = std::string(CONVOY_SOURCE_DIR) + "/configs/fashion_mnist.yaml";
const std::string kData = "/usr/share/datasets/fashion-mnist";

testing::CommandResult convoy(const std::string& args, const std::string& env = "") {
  return testing::run_command((env.empty() ? "" : "env " + env + " ") + std::string(CONVOY_BINARY) + " " + args +
                              " 2>&1");
}

double printed_accuracy(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("accuracy ([0-9.]+)%"))) return -1;
  return std::stod(m[1]);
}

// One LeNet-5 trained for one epoch on 6,000 images (about 80% test accuracy: real, trained-ish
// weights and activations) and its int8 checkpoint from `convoy quantize`, shared by the tests.
class QuantTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(kData + "/t10k-images-idx3-ubyte.gz")) return;
    dir_ = new fs::path(fs::temp_directory_path() / ("convoy_quant_" + std::to_string(getpid())));
    fs::remove_all(*dir_);
    const auto t = convoy("train --config " + kConfig + " --set name=q --set output.dir=" + dir_->string() +
                          " --set dataset.train_limit=6000 --set dataset.test_limit=1000 --set epochs=1"
                          " --set batch_size=64 --set device=cpu");
    if (t.status != 0) {
      std::cerr << t.output;
      return;
    }
    const auto q = convoy("quantize --model " + fp32_path() + " --calibration fashion-mnist:train --samples 512 -o " +
                          int8_path());
    if (q.status != 0) std::cerr << q.output;
    ready_ = q.status == 0;
  }
  static void TearDownTestSuite() {
    if (dir_) fs::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!fs::exists(kData + "/t10k-images-idx3-ubyte.gz"))
      GTEST_SKIP() << "Fashion-MNIST is not installed at " << kData << " (apt-get install dataset-fashion-mnist)";
    ASSERT_TRUE(ready_) << "training or quantizing the shared LeNet-5 failed (output above)";
    backend_ = select_backend("cpu", {}, std::cerr);
  }
  static std::string fp32_path() { return (*dir_ / "q/best.safetensors").string(); }
  static std::string int8_path() { return (*dir_ / "lenet-int8.safetensors").string(); }

  // The checkpoint's model on the CPU, and its normalization.
  Model load(const std::string& path, RunCheckpointInfo* info_out = nullptr) {
    RunCheckpoint ckpt = read_run_checkpoint(path, CheckpointUse::inference);
    Model model = Model::from_yaml(ckpt.info.model_yaml, path, 0);
    model.load_state(ckpt.tensors, path);
    model.to(*backend_, DType::f32);
    normalize_ = make_normalize(ckpt.info.mean, ckpt.info.std);
    if (info_out) *info_out = std::move(ckpt.info);
    return model;
  }
  // The first `n` images of a split, normalized, in batches of `batch` as `convoy quantize` reads them.
  std::vector<Tensor> images(const std::string& split, int64_t n, int64_t batch) {
    DatasetSpec spec;
    const auto data = load_dataset(spec, split, n);
    DataLoader loader(*data, eval_loader_options(Preprocess{}, batch, 2));
    loader.start_epoch(0);
    std::vector<Tensor> out;
    Batch b;
    while (loader.next(b)) {
      Tensor x = backend_->empty(b.images.shape(), DType::f32);  // (N, 1, 28, 28)
      backend_->ops().normalize_augment(b.images, normalize_, 0, x);
      out.push_back(std::move(x));
    }
    return out;
  }

  static inline fs::path* dir_ = nullptr;
  static inline bool ready_ = false;
  std::unique_ptr<Backend> backend_;
  NormalizeAugment normalize_;
};

std::vector<int> top1(const std::vector<float>& logits, int64_t classes) {
  std::vector<int> out;
  for (size_t i = 0; i < logits.size(); i += static_cast<size_t>(classes))
    out.push_back(static_cast<int>(std::max_element(logits.begin() + i, logits.begin() + i + classes) -
                                   (logits.begin() + i)));
  return out;
}

TEST_F(QuantTest, Int8LogitsTrackFp32AndTop1AgreesOnAtLeast97Percent) {
  Model model = load(fp32_path());
  const std::vector<float> ranges = calibrate_activation_max(model, images("train", 512, 64));
  const Tensor test = images("test", 512, 512).at(0);  // (512, 1, 28, 28)
  InferencePlan fp32(model, 512);
  InferenceOptions o;
  o.precision = Precision::int8;
  o.activation_max = ranges;
  InferencePlan int8(model, 512, o);
  EXPECT_NE(int8.describe().find("src s8"), std::string::npos) << "no int8 convolution:\n" << int8.describe();
  const std::vector<float> a = fp32.run(test).to_floats(), b = int8.run(test).to_floats();
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(a[i])));
  }
  // Stated tolerance: the worst logit within 10% of the largest |logit| (8-bit steps through
  // five layers; a wrong scale or bias is off by far more).
  EXPECT_LE(err, 0.10 * scale) << "max |int8 - fp32| " << err << ", max |logit| " << scale;
  EXPECT_GT(err, 0.0) << "int8 gave the fp32 logits exactly: was it quantized at all?";
  const auto ta = top1(a, 10), tb = top1(b, 10);
  int same = 0;
  for (size_t i = 0; i < ta.size(); ++i) same += ta[i] == tb[i];
  EXPECT_GE(same, static_cast<int>(0.97 * static_cast<double>(ta.size()))) << same << " of " << ta.size();
}

// fmnet's GELU after a batch norm alone: oneDNN 2.x applies the output scale before the
// post-ops, so an int8 plan must run a non-linear activation on real values (a GELU of scaled
// values cost fmnet 21 points of accuracy). Random weights, calibrated on other random images.
TEST(Int8Plan, GeluModelTracksFp32) {
  Model model = Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/fmnet.yaml", 7);
  std::unique_ptr<Backend> backend = select_backend("cpu", {}, std::cerr);
  model.to(*backend, DType::f32);
  auto input = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> n(0.0f, 1.0f);
    Tensor x = Tensor::empty({64, 1, 28, 28});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = n(rng);
    return x;
  };
  InferenceOptions o;
  o.precision = Precision::int8;
  o.activation_max = calibrate_activation_max(model, {input(1), input(2)});
  const Tensor x = input(3);
  InferencePlan fp32(model, 64), int8(model, 64, o);
  const std::vector<float> a = fp32.run(x).to_floats(), b = int8.run(x).to_floats();
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(a[i])));
  }
  EXPECT_LE(err, 0.10 * scale) << "max |int8 - fp32| " << err << ", max |logit| " << scale;
}

// A layer whose output calibration finds 0 on every image cannot be quantized (its int8 scale
// would saturate every other value): refused naming the layer, not written for infer to refuse.
TEST(Int8Calibration, ALayerWhoseOutputIsZeroIsRefusedNamingIt) {
  Model model = Model::from_yaml(
      "name: dead\ninput: [1, 8, 8]\nlayers:\n"
      "  - {name: conv, type: conv2d, out_channels: 2, kernel: 3}\n"
      "  - {type: flatten}\n"
      "  - {name: fc, type: linear, out_features: 2}\n",
      "dead.yaml", 1);
  std::unique_ptr<Backend> backend = select_backend("cpu", {}, std::cerr);
  model.to(*backend, DType::f32);
  for (auto& [name, p] : model.parameters())
    if (name.rfind("conv.", 0) == 0) std::fill_n(p->value.data<float>(), p->value.numel(), 0.0f);
  Tensor x = Tensor::empty({4, 1, 8, 8});
  std::fill_n(x.data<float>(), x.numel(), 0.5f);
  try {
    calibrate_activation_max(model, {x});
    ADD_FAILURE() << "a zero range was calibrated without an error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("calibration of model 'dead': the output of layer 'conv' is at most 0 on "
                                         "every calibration image: too small a range to quantize"),
              std::string::npos)
        << e.what();
  }
}

// ResNet-18's residual sums in int8: the identity shortcut shared in place (u8 after a ReLU),
// the downsampling shortcut (s8, no activation) copied into the destination's type and scale.
TEST(Int8Plan, ResNet18ResidualsTrackFp32) {
  Model model = Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/resnet18.yaml", 11);
  std::unique_ptr<Backend> backend = select_backend("cpu", {}, std::cerr);
  model.to(*backend, DType::f32);
  const Shape& in = model.input_shape();
  auto input = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> n(0.0f, 1.0f);
    Tensor x = Tensor::empty({2, in[0], in[1], in[2]});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = n(rng);
    return x;
  };
  InferenceOptions o;
  o.precision = Precision::int8;
  o.activation_max = calibrate_activation_max(model, {input(1), input(2)});
  const Tensor x = input(3);
  InferencePlan fp32(model, 2), int8(model, 2, o);
  EXPECT_NE(int8.describe().find("+add"), std::string::npos);
  const std::vector<float> a = fp32.run(x).to_floats(), b = int8.run(x).to_floats();
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(a[i])));
  }
  EXPECT_LE(err, 0.15 * scale) << "max |int8 - fp32| " << err << ", max |logit| " << scale;
}

TEST_F(QuantTest, CheckpointRoundTripRunsInt8WithoutCalibration) {
  Model model = load(fp32_path());
  const std::vector<float> ranges = calibrate_activation_max(model, images("train", 512, 64));
  RunCheckpointInfo info;
  Model stored = load(int8_path(), &info);
  ASSERT_FALSE(info.int8_activation_max.empty());
  EXPECT_EQ(info.int8_activation_max.count(kQuantInputName), 1u);
  const std::vector<float> read = activation_max_by_node(stored, info.int8_activation_max, int8_path());
  ASSERT_EQ(read.size(), ranges.size());
  for (size_t i = 0; i < read.size(); ++i) EXPECT_EQ(read[i], ranges[i]) << "tensor " << i;
  const Tensor test = images("test", 64, 64).at(0);
  InferenceOptions here, from_file;
  here.precision = from_file.precision = Precision::int8;
  here.activation_max = ranges;
  from_file.activation_max = read;
  InferencePlan a(model, 64, here), b(stored, 64, from_file);
  EXPECT_EQ(a.run(test).to_floats(), b.run(test).to_floats());

  // The CLI: an int8 checkpoint runs int8 by default, within a point of fp32 on the 10,000 test images.
  const auto f = convoy("infer --device cpu --model " + fp32_path() + " --data fashion-mnist:test");
  const auto q = convoy("infer --device cpu --model " + int8_path() + " --data fashion-mnist:test");
  ASSERT_EQ(f.status, 0) << f.output;
  ASSERT_EQ(q.status, 0) << q.output;
  EXPECT_NEAR(printed_accuracy(q.output), printed_accuracy(f.output), 1.0) << f.output << q.output;
}

TEST_F(QuantTest, RefusesBadInput) {
  auto expect_error = [](const testing::CommandResult& r, const std::string& text) {
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find(text), std::string::npos) << "expected '" << text << "' in: " << r.output;
  };
  const std::string out = (*dir_ / "x.safetensors").string();
  expect_error(convoy("quantize --model " + fp32_path() + " --calibration fashion-mnist -o " + out), "KIND:SPLIT");
  expect_error(convoy("quantize --model " + fp32_path() + " --calibration fashion-mnist:train --data-path " +
                      (*dir_ / "nowhere").string() + " -o " + out),
               "nowhere");
  expect_error(convoy("quantize --model " + fp32_path() + " --calibration no-such-kind:train -o " + out),
               "no-such-kind");
  expect_error(convoy("quantize --model " + int8_path() + " --calibration fashion-mnist:train -o " + out),
               "already an int8 checkpoint");
  expect_error(convoy("quantize --model " + fp32_path() + " --calibration fashion-mnist:train -o " + fp32_path()),
               "would overwrite");
  EXPECT_FALSE(fs::exists(out));
  expect_error(convoy("infer --device cpu --precision int8 --model " + fp32_path() + " --data fashion-mnist:test"),
               "not an int8 checkpoint");
  expect_error(convoy("infer --device cpu --no-plan --model " + int8_path() + " --data fashion-mnist:test"),
               "inference plan only");
  // Training does not resume from an int8 checkpoint.
  fs::create_directories(*dir_ / "r/q");
  fs::copy_file(int8_path(), *dir_ / "r/q/last.safetensors", fs::copy_options::overwrite_existing);
  expect_error(convoy("train --config " + kConfig + " --set name=q --set output.dir=" + (*dir_ / "r").string() +
                      " --set device=cpu --resume"),
               "for CPU inference only");
  // In-process: an int8 plan needs one range per tensor.
  Model model = load(fp32_path());
  InferenceOptions o;
  o.precision = Precision::int8;
  o.activation_max = {1.0f, 2.0f};
  EXPECT_THROW(InferencePlan(model, 4, o), InputError);
}

TEST(QuantizeForTheGpu, AModelTheEightBitPlanCannotRunIsRefusedBeforeCalibrating) {
  // fmnet: its stem's GELU (the 8-bit convolutions fuse a ReLU only). Untrained weights will do:
  // the refusal comes before any image is read.
  const convoy::testing::TempDir dir("convoy-quant-gpu");
  Model model = Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/fmnet.yaml", 3);
  RunCheckpointInfo info;
  info.model_yaml = model.yaml();
  info.class_names = std::vector<std::string>(10, "c");
  info.input_shape = model.input_shape();
  info.mean = {0.286};
  info.std = {0.353};
  const std::string ckpt = (dir / "fmnet.safetensors").string(), out = (dir / "fmnet-int8.safetensors").string();
  save_run_checkpoint(ckpt, model, {}, info);
  const auto q = convoy("quantize --device cuda --model " + ckpt + " --calibration fashion-mnist:train -o " + out);
  EXPECT_EQ(q.status, 1) << q.output;
  EXPECT_NE(q.output.find("--device cuda: the GPU's 8-bit plan cannot run this model: layer 'stem_act' (gelu)"),
            std::string::npos) << q.output;
  EXPECT_FALSE(fs::exists(out));
}

TEST(ActivationHistogram, PercentileClipsTheRareOutliersAndMaxKeepsThem) {
  // 100,000 values spread over [0, 1) (a quarter of them exactly 0, as after a ReLU), and five
  // outliers at 50: the 99.99th percentile is the bulk's top (within a bin: 2^-7 relative), max
  // the outlier.
  std::vector<float> v;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int i = 0; i < 100000; ++i) v.push_back(i % 4 == 0 ? 0.0f : (i % 2 ? -1.0f : 1.0f) * u(rng));
  for (int i = 0; i < 5; ++i) v.push_back(50.0f);
  ActivationHistogram a, b;
  a.add(v.data(), v.size() / 2);
  b.add(v.data() + v.size() / 2, v.size() - v.size() / 2);
  a.merge(b);  // two batches
  EXPECT_EQ(a.count(), v.size());
  EXPECT_EQ(a.max(), 50.0f);
  EXPECT_EQ(a.percentile(100), 50.0f);
  const float p = a.percentile(99.99);
  EXPECT_GT(p, 0.99f);
  EXPECT_LT(p, 1.0f * (1 + 1.0f / 128));
  // The 50th percentile of |v|: a quarter zeros, the rest uniform: |v| at 1/3 of the way.
  EXPECT_NEAR(a.percentile(50), 1.0f / 3, 0.01);
  // Without bins (the max method) every percentile is the max; a non-finite value is counted
  // apart, not taken as a range.
  ActivationHistogram m(false);
  const float odd[] = {1.0f, -3.0f, std::numeric_limits<float>::infinity(), std::nanf("")};
  m.add(odd, 4);
  EXPECT_EQ(m.max(), 3.0f);
  EXPECT_EQ(m.percentile(99.99), 3.0f);
  EXPECT_EQ(m.non_finite(), 2u);
  EXPECT_EQ(m.count(), 2u);
}

TEST_F(QuantTest, CalibrationIsDeterministicAndPercentileRangesAreAtMostTheMax) {
  Model model = load(fp32_path());
  const std::vector<Tensor> batches = images("train", 256, 64);
  const Calibration p{CalibrationMethod::percentile, 99.99, 0};
  const std::vector<float> once = calibrate_activation_ranges(model, batches, p);
  EXPECT_EQ(calibrate_activation_ranges(model, batches, p), once);  // bit for bit, run again
  Calibration one_thread = p;
  one_thread.threads = 1;
  const std::vector<float> alone = calibrate_activation_ranges(model, batches, one_thread);
  const std::vector<float> max = calibrate_activation_max(model, batches);
  ASSERT_EQ(alone.size(), once.size());
  ASSERT_EQ(max.size(), once.size());
  int clipped = 0;
  for (size_t i = 0; i < once.size(); ++i) {
    // Another team sums in another order: the same bin, or the next (2^-7 apart).
    EXPECT_NEAR(alone[i], once[i], once[i] / 64) << "tensor " << i;
    EXPECT_LE(once[i], max[i]) << "tensor " << i;
    EXPECT_EQ(once[i] == 0, max[i] == 0) << "tensor " << i;  // the same tensors have ranges
    clipped += once[i] < max[i];
  }
  EXPECT_GE(clipped, 1) << "no tensor had an outlier above its 99.99th percentile";
}

TEST_F(QuantTest, GpuTargetsRecordTheirTypeAndMethodAndRunOnTheCpuAsInt8) {
  const std::string gpu_int8 = (*dir_ / "cuda-int8.safetensors").string(), fp8 = (*dir_ / "cuda-fp8.safetensors").string();
  const auto q = convoy("quantize --model " + fp32_path() + " --calibration fashion-mnist:train --samples 256 --device cuda -o " +
                        gpu_int8);
  ASSERT_EQ(q.status, 0) << q.output;
  EXPECT_NE(q.output.find("(percentile 99.99) on 256 images"), std::string::npos) << q.output;
  EXPECT_NE(q.output.find("runs int8 there"), std::string::npos) << q.output;
  const auto f = convoy("quantize --model " + fp32_path() + " --calibration fashion-mnist:train --samples 256 --device cuda"
                        " --precision fp8 -o " + fp8);
  ASSERT_EQ(f.status, 0) << f.output;
  RunCheckpointInfo a, b;
  load(gpu_int8, &a);
  load(fp8, &b);
  EXPECT_EQ(a.quantization.device, "cuda");
  EXPECT_EQ(a.quantization.type, "int8");
  EXPECT_EQ(a.quantization.method, "percentile");
  EXPECT_EQ(a.quantization.percentile, 99.99);
  EXPECT_EQ(a.quantization.images, 256);
  EXPECT_EQ(b.quantization.type, "fp8");
  EXPECT_EQ(b.quantization.method, "max");
  // The CPU's own file says cpu int8 by max; so does an older file without the record.
  RunCheckpointInfo c;
  load(int8_path(), &c);
  EXPECT_EQ(c.quantization.device, "cpu");
  EXPECT_EQ(c.quantization.method, "max");
  // Percentile ranges run on the CPU's int8 plan within a point of fp32.
  const auto fp32 = convoy("infer --device cpu --model " + fp32_path() + " --data fashion-mnist:test");
  const auto int8 = convoy("infer --device cpu --model " + gpu_int8 + " --data fashion-mnist:test");
  ASSERT_EQ(int8.status, 0) << int8.output;
  EXPECT_NEAR(printed_accuracy(int8.output), printed_accuracy(fp32.output), 1.0) << fp32.output << int8.output;
  // FP8 is refused for the CPU, with the reason.
  const auto cpu_fp8 = convoy("quantize --model " + fp32_path() + " --calibration fashion-mnist:train --precision fp8 -o " +
                              (*dir_ / "never.safetensors").string());
  EXPECT_EQ(cpu_fp8.status, 1) << cpu_fp8.output;
  EXPECT_NE(cpu_fp8.output.find("the CPU plans have no FP8 kernels"), std::string::npos) << cpu_fp8.output;
  // A percentile asks for the percentile method; with max it is a contradiction, refused.
  const auto both = convoy("quantize --model " + fp32_path() + " --calibration fashion-mnist:train --method max"
                           " --percentile 99.9 -o " + (*dir_ / "never.safetensors").string());
  EXPECT_EQ(both.status, 1) << both.output;
  EXPECT_NE(both.output.find("with --method max"), std::string::npos) << both.output;
  EXPECT_FALSE(fs::exists(*dir_ / "never.safetensors"));
}

TEST_F(QuantTest, Bf16TracksFp32WhereTheCpuHasIt) {
  // Refused, with the reason, where oneDNN may not use AVX-512 BF16 (DNNL_MAX_CPU_ISA caps it).
  const auto capped = convoy("infer --device cpu --precision bf16 --model " + fp32_path() + " --data fashion-mnist:test",
                             "DNNL_MAX_CPU_ISA=AVX512_CORE");
  EXPECT_EQ(capped.status, 1) << capped.output;
  EXPECT_NE(capped.output.find("AVX-512 BF16 or AMX"), std::string::npos) << capped.output;
  if (const std::string why = bf16_unsupported_reason(); !why.empty()) GTEST_SKIP() << why;
  Model model = load(fp32_path());
  const Tensor test = images("test", 256, 256).at(0);
  InferencePlan fp32(model, 256);
  InferenceOptions o;
  o.precision = Precision::bf16;
  InferencePlan bf16(model, 256, o);
  EXPECT_NE(bf16.describe().find("src bf16"), std::string::npos) << bf16.describe();
  const std::vector<float> a = fp32.run(test).to_floats(), b = bf16.run(test).to_floats();
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(a[i])));
  }
  EXPECT_LE(err, 0.03 * scale) << "bf16 (8-bit mantissa) logits vs fp32";
  EXPECT_GT(err, 0.0);
  const auto ta = top1(a, 10), tb = top1(b, 10);
  int same = 0;
  for (size_t i = 0; i < ta.size(); ++i) same += ta[i] == tb[i];
  EXPECT_GE(same, static_cast<int>(0.99 * static_cast<double>(ta.size())));
}

}  // namespace
}  // namespace convoy
