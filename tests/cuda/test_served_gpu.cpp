// `convoy serve` on a GPU (ServedVersion with device: cuda): requests batched by the dynamic batcher
// get what GraphedBatches gives for the same images, each precision within its tolerance of the
// CPU's f32 forward; auto serves a bf16-trained checkpoint in bf16 and a checkpoint quantized for
// the GPU in its 8-bit type; int8 without calibrated ranges is refused.
#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "apps/serve/metrics.h"
#include "datasets/image_codec.h"
#include "datasets/nvjpeg.h"
#include "datasets/preprocess.h"
#include "apps/serve/served_model.h"
#include "engine/backends/backend.h"
#include "engine/bundle/run_checkpoint.h"
#include "engine/core/error.h"
#include "engine/graph/model.h"
#include "engine/inference/graphed_batches.h"
#include "engine/inference/quantize.h"
#include "tests/model_step.h"
#include "tests/temp_dir.h"

using namespace convoy;
using namespace convoy::serve;
using convoy::testing::relative_difference;

namespace {

class ServedGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  }
};

const std::string kModel = std::string(CONVOY_SOURCE_DIR) + "/models/resnet20.yaml";

// A checkpoint of resnet20 (random weights), trained "in" `trained`.
std::string write_checkpoint(const std::filesystem::path& dir, Precision trained) {
  Model model = Model::from_file(kModel, 5);
  RunCheckpointInfo info;
  info.model_yaml = model.yaml();
  info.class_names = std::vector<std::string>(static_cast<size_t>(model.num_classes()), "c");
  for (size_t i = 0; i < info.class_names.size(); ++i) info.class_names[i] += std::to_string(i);
  info.input_shape = model.input_shape();
  info.mean = {0.49, 0.48, 0.45};
  info.std = {0.25, 0.24, 0.26};
  info.precision = trained;
  Preprocess p;
  p.channels = 3;
  p.height = p.width = 32;
  p.resize = 36;  // a 48x40 JPEG: resized, then centre-cropped
  info.preprocess = p;
  const std::string path = (dir / "model.safetensors").string();
  save_run_checkpoint(path, model, {}, info);
  return path;
}

Tensor random_images(int64_t n, uint32_t seed);

// The same checkpoint quantized for the GPU (as `convoy quantize --device cuda --method max`
// writes it), its ranges from `calibration` images through the CPU's f32 plan.
std::string write_eight_bit_checkpoint(const std::filesystem::path& dir, const Tensor& calibration,
                                       const std::string& type) {
  auto cpu = make_cpu_backend({});
  Model model = Model::from_file(kModel, 5);
  model.to(*cpu, DType::f32);
  Tensor x = cpu->empty(calibration.shape(), DType::f32);
  cpu->ops().normalize_augment(calibration, make_normalize({0.49, 0.48, 0.45}, {0.25, 0.24, 0.26}), 0, x);
  RunCheckpointInfo info = read_run_checkpoint(write_checkpoint(dir, Precision::bf16), CheckpointUse::inference).info;
  info.precision = Precision::int8;
  info.int8_activation_max = activation_max_by_name(model, calibrate_activation_max(model, {x}));
  info.quantization = {"cuda", type, "max", 100.0, calibration.dim(0)};
  const std::string path = (dir / ("model-" + type + ".safetensors")).string();
  save_run_checkpoint(path, model, {}, info);
  return path;
}

Tensor random_images(int64_t n, uint32_t seed) {
  Tensor t = Tensor::empty({n, 3, 32, 32}, DType::u8);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(rng());
  return t;
}

// The CPU's f32 probabilities for `images` with the checkpoint's normalization.
std::vector<float> cpu_probabilities(const Tensor& images) {
  auto cpu = make_cpu_backend({});
  Model m = Model::from_file(kModel, 5);
  m.to(*cpu, DType::f32);
  NormalizeAugment norm = make_normalize({0.49, 0.48, 0.45}, {0.25, 0.24, 0.26});
  Tensor x = cpu->empty(images.shape(), DType::f32);
  cpu->ops().normalize_augment(images, norm, 0, x);
  const Tensor out = m.forward(*cpu, x, StepInfo{});
  Tensor p = cpu->empty(out.shape(), DType::f32);
  cpu->ops().softmax(out, p);
  return p.to_floats();
}

// Submits one request per image at once (so the batcher merges them) and gathers the answers.
std::vector<float> serve_all(ServedVersion& v, const Tensor& images) {
  std::vector<std::promise<InferResult>> promises(static_cast<size_t>(images.dim(0)));
  std::vector<std::future<InferResult>> futures;
  for (int64_t i = 0; i < images.dim(0); ++i) {
    InferJob job;
    job.input = images.slice_rows(i, i + 1).clone();
    job.enqueued = Clock::now();
    auto* p = &promises[static_cast<size_t>(i)];
    job.done = [p](InferResult r) { p->set_value(std::move(r)); };
    futures.push_back(p->get_future());
    EXPECT_TRUE(v.submit(std::move(job)));
  }
  std::vector<float> out;
  for (auto& f : futures) {
    InferResult r = f.get();
    EXPECT_EQ(r.status, InferResult::Status::ok) << r.error;
    out.insert(out.end(), r.probabilities.begin(), r.probabilities.end());
  }
  return out;
}

// resnet20 on the GPU, requests merged into batches of up to 8.
ModelConfig batching_config() {
  ModelConfig config;
  config.name = "r20";
  config.device = "cuda";
  config.max_batch_size = 8;
  config.dynamic_batching = true;
  config.max_queue_delay_us = 2000;
  return config;
}

TEST_F(ServedGpu, BatchedRequestsAgreeWithTheCpuInEachPrecision) {
  convoy::testing::TempDir dir("convoy-served-gpu");
  const std::string checkpoint = write_checkpoint(dir.path(), Precision::bf16);
  const Tensor images = random_images(13, 3);
  const std::vector<float> want = cpu_probabilities(images);
  for (auto [precision, tol] : {std::pair{std::optional<Precision>{Precision::fp32}, 1e-5},
                                std::pair{std::optional<Precision>{Precision::tf32}, 1e-2},
                                std::pair{std::optional<Precision>{}, 3e-2}}) {  // auto: bf16, as trained
    ModelConfig config = batching_config();
    config.instance_count = 2;
    config.precision = precision;
    MetricsRegistry metrics;
    ServedVersion v(config, 1, checkpoint, 0, metrics, EngineOptions{});
    const std::string expect = precision ? to_string(*precision) : "bf16";
    EXPECT_EQ(v.execution().rfind(expect + " recorded forwards", 0), 0u) << v.execution();
    EXPECT_EQ(v.model_copies(), 1u) << "the two instances share one copy of the weights";
    const std::vector<float> got = serve_all(v, images);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LE(relative_difference(got, want), tol) << v.execution();
    // Again, many at once: both instances busy, each with batches in flight.
    const Tensor more = random_images(64, 11);
    const std::vector<float> got_more = serve_all(v, more);
    EXPECT_LE(relative_difference(got_more, cpu_probabilities(more)), tol) << v.execution();
    v.stop();
  }
}

// The plan's own answer for each image alone: GraphedBatches over the checkpoint's model (the
// same weights: the checkpoint is Model::from_file's) in `precision`, prepared as serve does.
std::vector<float> plan_probabilities(const Tensor& images, Precision precision) {
  BackendOptions options;
  options.tf32 = precision == Precision::tf32;
  auto gpu = make_cuda_backend(0, options);
  Model m = Model::from_file(kModel, 5);
  m.to(*gpu, DType::f32);
  const DType dtype = precision == Precision::bf16 ? DType::bf16 : DType::f32;
  m.to(*gpu, dtype, gpu->preferred_layout(dtype));
  GraphedBatches plan(*gpu, m, 8, make_normalize({0.49, 0.48, 0.45}, {0.25, 0.24, 0.26}));
  std::vector<float> out, logits, probs;
  for (int64_t i = 0; i < images.dim(0); ++i) {
    plan.run(images.slice_rows(i, i + 1), logits, probs);
    out.insert(out.end(), probs.begin(), probs.end());
  }
  return out;
}

// Served one request at a time, each batch is one image, run by the same recording of the same
// plan as GraphedBatches alone: the answers are the plan's, bit for bit, in every precision.
TEST_F(ServedGpu, OneRequestAtATimeGetsThePlansAnswerExactly) {
  convoy::testing::TempDir dir("convoy-served-gpu");
  const std::string checkpoint = write_checkpoint(dir.path(), Precision::bf16);
  const Tensor images = random_images(5, 17);
  for (Precision precision : {Precision::fp32, Precision::tf32, Precision::bf16}) {
    ModelConfig config;
    config.name = "r20";
    config.device = "cuda";
    config.max_batch_size = 8;
    config.precision = precision;
    MetricsRegistry metrics;
    ServedVersion v(config, 1, checkpoint, 0, metrics, EngineOptions{});
    std::vector<float> served;
    for (int64_t i = 0; i < images.dim(0); ++i) {  // each waits for its answer: batches of one
      const std::vector<float> one = serve_all(v, images.slice_rows(i, i + 1));
      served.insert(served.end(), one.begin(), one.end());
    }
    v.stop();
    const std::vector<float> want = plan_probabilities(images, precision);
    ASSERT_EQ(served.size(), want.size());
    EXPECT_EQ(relative_difference(served, want), 0.0) << to_string(precision) << ": " << v.execution();
  }
}

TEST_F(ServedGpu, AnEightBitCheckpointServesThroughTheEightBitPlan) {
  convoy::testing::TempDir dir("convoy-served-gpu");
  const Tensor images = random_images(13, 3);
  const std::vector<float> want = cpu_probabilities(images);
  for (const std::string type : {"int8", "fp8"}) {
    if (auto why = make_cuda_backend(0, {})->eight_bit_unsupported_reason(type == "int8" ? EightBitType::int8
                                                                                           : EightBitType::fp8);
        !why.empty()) {
      std::cout << type << " skipped: " << why << "\n";
      continue;
    }
    ModelConfig config = batching_config();
    MetricsRegistry metrics;
    // auto: the type the checkpoint was quantized for.
    ServedVersion v(config, 1, write_eight_bit_checkpoint(dir.path(), random_images(32, 9), type), 0, metrics,
                    EngineOptions{});
    EXPECT_EQ(v.execution().rfind(type + " recorded forwards", 0), 0u) << v.execution();
    // resnet20's 21 convolutions but the stem (3 input channels) in 8 bits.
    EXPECT_NE(v.execution().find("the 8-bit plan runs 20 convolutions in " + type), std::string::npos) << v.execution();
    const std::vector<float> got = serve_all(v, images);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LE(relative_difference(got, want), type == "int8" ? 0.03 : 0.08) << v.execution();
    v.stop();
  }
}

TEST_F(ServedGpu, Int8FromACheckpointWithoutRangesIsRefusedOnAGpu) {
  convoy::testing::TempDir dir("convoy-served-gpu");
  const std::string checkpoint = write_checkpoint(dir.path(), Precision::fp32);
  ModelConfig config;
  config.name = "r20";
  config.device = "cuda";
  config.precision = Precision::int8;
  MetricsRegistry metrics;
  try {
    ServedVersion v(config, 1, checkpoint, 0, metrics, EngineOptions{});
    FAIL() << "int8 of an fp32 checkpoint was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is not an int8 checkpoint"), std::string::npos) << e.what();
  }
}

TEST_F(ServedGpu, JpegsDecodedByNvjpegAgreeWithTheCpusDecoding) {
  if (auto why = nvjpeg_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  convoy::testing::TempDir dir("convoy-served-gpu");
  const std::string checkpoint = write_checkpoint(dir.path(), Precision::fp32);
  ModelConfig config;
  config.name = "r20";
  config.device = "cuda";
  config.max_batch_size = 8;
  MetricsRegistry metrics;
  ServedVersion v(config, 1, checkpoint, 0, metrics, EngineOptions{});
  // Six 48x40 JPEGs of smooth colour: on the GPU through nvJPEG, and as pixels the CPU decoded.
  InferJob encoded;
  Tensor pixels = Tensor::empty({6, 3, 32, 32}, DType::u8);
  for (int k = 0; k < 6; ++k) {
    std::vector<uint8_t> rgb(48 * 40 * 3);
    for (int y = 0; y < 40; ++y)
      for (int x = 0; x < 48; ++x)
        for (int c = 0; c < 3; ++c)
          rgb[static_cast<size_t>((y * 48 + x) * 3 + c)] = static_cast<uint8_t>(40 + 3 * x + 2 * y + 30 * c + 10 * k);
    const std::vector<uint8_t> jpeg = encode_jpeg(rgb.data(), 48, 40, 3, 95);
    encoded.encoded.emplace_back(jpeg.begin(), jpeg.end());
    decode_preprocess(jpeg, "jpeg", v.preprocess(), SampleMode::eval, 0, pixels.data<uint8_t>() + k * 3 * 32 * 32);
  }
  auto run = [&](InferJob job) {
    std::promise<InferResult> promise;
    job.enqueued = Clock::now();
    job.done = [&promise](InferResult r) { promise.set_value(std::move(r)); };
    EXPECT_TRUE(v.submit(std::move(job)));
    InferResult r = promise.get_future().get();
    EXPECT_EQ(r.status, InferResult::Status::ok) << r.error;
    return r.probabilities;
  };
  InferJob decoded;
  decoded.input = pixels;
  const std::vector<float> from_gpu = run(std::move(encoded)), from_cpu = run(std::move(decoded));
  ASSERT_EQ(from_gpu.size(), from_cpu.size());
  // nvJPEG's IDCT and resize differ from libjpeg-turbo's by a level or two in a few pixels.
  EXPECT_LE(relative_difference(from_gpu, from_cpu), 2e-2);
  v.stop();
}

}  // namespace
