// The GPU's 8-bit inference plan (issue 37): a residual ReLU net compiled in int8 and FP8
// (Backend::compile_8bit) against the CPU's f32 forward of the same weights, through
// GraphedBatches' recordings at every batch size; and Fashion-MNIST's test accuracy of a net
// trained on the GPU, quantized by `convoy quantize --device cuda` from training images, in int8
// and FP8 against the same checkpoint in bf16 (issue 37's bar: within half a point).
#include <gtest/gtest.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <regex>
#include <string>
#include <unistd.h>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/graph/model.h"
#include "engine/inference/eight_bit_graph.h"
#include "engine/inference/graphed_batches.h"
#include "engine/inference/quantize.h"
#include "tests/eight_bit_net.h"
#include "tests/model_step.h"
#include "tests/run_command.h"

namespace convoy {
namespace {

using testing::relative_difference;

namespace fs = std::filesystem;

// Skips with the reason where no GPU has the type's tensor cores.
std::string unusable(EightBitType type) {
  if (auto why = cuda_unavailable_reason(); !why.empty()) return why;
  return make_cuda_backend(0, {})->eight_bit_unsupported_reason(type);
}

class EightBitPlan : public ::testing::TestWithParam<EightBitType> {
 protected:
  void SetUp() override {
    if (auto why = unusable(GetParam()); !why.empty()) GTEST_SKIP() << why;
  }
};

Tensor random_images(int64_t n, uint32_t seed) {
  Tensor t = Tensor::empty({n, 1, 28, 28}, DType::u8);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(rng());
  return t;
}

TEST_P(EightBitPlan, AResidualNetTracksTheCpusF32AtEveryBatchSize) {
  const EightBitType type = GetParam();
  auto cpu = make_cpu_backend({});
  Model ref = Model::from_yaml(testing::kEightBitNetYaml, "eight_bit_net", 5);
  ref.to(*cpu, DType::f32);
  NormalizeAugment norm;
  norm.mean[0] = 0.3f;
  norm.std[0] = 0.35f;
  const Tensor images = random_images(7, 11);
  Tensor x = cpu->empty(images.shape(), DType::f32);
  cpu->ops().normalize_augment(images, norm, 0, x);
  // Ranges by max over these very images: the plan's error is its rounding alone, no clipping.
  const std::vector<float> ranges = calibrate_activation_max(ref, {x});
  const std::vector<float> want = ref.forward(*cpu, x, StepInfo{}).to_floats();

  auto gpu = make_cuda_backend(0, {});
  Model model = Model::from_yaml(testing::kEightBitNetYaml, "eight_bit_net", 5);
  model.to(*gpu, DType::bf16, Layout::nhwc);
  const EightBitGraph graph = eight_bit_graph(model, ranges, type);
  // Sizes 1, 2, 4 and 8 recorded: 7 images run as one padded pass of 8.
  GraphedBatches batches(*gpu, model, 8, norm, &graph);
  ASSERT_NE(batches.eight_bit_plan(), nullptr);
  EXPECT_EQ(batches.eight_bit_plan()->eight_bit_convolutions(), 3) << batches.eight_bit_plan()->describe();
  std::vector<float> logits, probs;
  batches.run(images, logits, probs);
  EXPECT_TRUE(batches.replaying()) << "the 8-bit plan was not recorded";
  ASSERT_EQ(logits.size(), want.size());
  const double error = relative_difference(logits, want);
  std::cout << eight_bit_name(type) << " logits vs the CPU's f32: relative L2 difference " << error << "\n"
            << batches.eight_bit_plan()->describe();
  // int8: 8 bits of each of 4 quantized tensors (~0.4% of a range each, summed over the layers);
  // e4m3 keeps 3 mantissa bits (~3% a value), averaged over the sums. bf16 alone is ~0.5%.
  const double bound = type == EightBitType::int8 ? 0.03 : 0.08;
  EXPECT_LT(error, bound);
  // The same images again, one at a time: batch 1's own plan and recording (its engines may
  // round otherwise), within the same bound of each image's f32 logits.
  const size_t classes = want.size() / static_cast<size_t>(images.dim(0));
  for (int64_t i = 0; i < images.dim(0); ++i) {
    std::vector<float> one, one_probs;
    batches.run(images.slice_rows(i, i + 1), one, one_probs);
    const auto row = want.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(i) * classes);
    EXPECT_LT(relative_difference(one, std::vector<float>(row, row + static_cast<std::ptrdiff_t>(classes))), bound) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, EightBitPlan, ::testing::Values(EightBitType::int8, EightBitType::fp8),
                         [](const auto& info) { return std::string(eight_bit_name(info.param)); });

// The accuracy bar on real data: trained on the GPU, calibrated on training images. The GPU
// machine's copy of the data set is where CONVOY_FASHION_MNIST says (benchmarks/gpu/run.sh).
std::string fashion_mnist() {
  const char* dir = std::getenv("CONVOY_FASHION_MNIST");
  return dir && *dir ? dir : "/usr/share/datasets/fashion-mnist";
}

testing::CommandResult convoy(const std::string& args) {
  return testing::run_command(std::string(CONVOY_BINARY) + " " + args + " 2>&1");
}

double printed_accuracy(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("accuracy ([0-9.]+)%"))) return -1;
  return std::stod(m[1]);
}

TEST(EightBitAccuracy, FashionMnistInInt8AndFp8IsWithinHalfAPointOfBf16) {
  if (auto why = unusable(EightBitType::int8); !why.empty()) GTEST_SKIP() << why;
  const std::string data = fashion_mnist();
  if (!fs::exists(data + "/t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST is not installed at " << data << " (apt-get install dataset-fashion-mnist)";
  const fs::path dir = fs::temp_directory_path() / ("convoy_8bit_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path model = dir / "eight_bit_net.yaml";
  std::ofstream(model) << testing::kEightBitNetYaml;
  const auto t = convoy("train --config " + std::string(CONVOY_SOURCE_DIR) + "/configs/fashion_mnist.yaml --set name=net"
                        " --set model=" + model.string() + " --set output.dir=" + dir.string() +
                        " --set epochs=3 --set batch_size=128 --set device=cuda --set precision=bf16 --set dataset.path=" + data);
  ASSERT_EQ(t.status, 0) << t.output;
  const std::string fp32 = (dir / "net/best.safetensors").string();
  const auto bf16 = convoy("infer --device cuda --precision bf16 --model " + fp32 + " --data fashion-mnist:test --data-path " + data);
  ASSERT_EQ(bf16.status, 0) << bf16.output;
  const double base = printed_accuracy(bf16.output);
  EXPECT_GT(base, 85.0) << "the net did not train: " << bf16.output;
  for (const char* type : {"int8", "fp8"}) {
    if (auto why = unusable(std::string(type) == "fp8" ? EightBitType::fp8 : EightBitType::int8); !why.empty()) {
      std::cout << type << " skipped: " << why << "\n";
      continue;
    }
    const std::string file = (dir / (std::string(type) + ".safetensors")).string();
    const auto q = convoy("quantize --device cuda --precision " + std::string(type) + " --model " + fp32 +
                          " --calibration fashion-mnist:train --samples 1024 --data-path " + data + " -o " + file);
    ASSERT_EQ(q.status, 0) << q.output;
    const auto r = convoy("infer --device cuda --model " + file + " --data fashion-mnist:test --data-path " + data);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find(std::string("in ") + type), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("8-bit plan: 3 convolutions in 8 bits"), std::string::npos) << r.output;
    const double acc = printed_accuracy(r.output);
    std::cout << "Fashion-MNIST test accuracy: bf16 " << base << "%, " << type << " " << acc << "%\n";
    EXPECT_NEAR(acc, base, 0.5) << r.output;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace convoy
