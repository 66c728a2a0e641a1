// GPU inference for servers and `convoy infer` (GraphedBatches): u8 images up from pinned staging,
// normalized on the device, one recorded forward per batch size, padded passes. Checked against
// the CPU's f32 forward of the same weights on the same normalized images.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/graph/model.h"
#include "engine/inference/graphed_batches.h"
#include "tests/model_step.h"

using namespace convoy;
using convoy::testing::relative_difference;

namespace {

class GraphedBatchesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  }
};

Model resnet20() { return Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/resnet20.yaml", 11); }

// n random u8 images (n, 3, 32, 32) on the host.
Tensor random_images(int64_t n, uint32_t seed) {
  Tensor t = Tensor::empty({n, 3, 32, 32}, DType::u8);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(rng());
  return t;
}

// The CPU's f32 logits and probabilities for the same images.
void cpu_reference(Model& ref, Backend& cpu, const Tensor& images, const NormalizeAugment& norm,
                   std::vector<float>& logits, std::vector<float>& probs) {
  Tensor x = cpu.empty(images.shape(), DType::f32);
  cpu.ops().normalize_augment(images, norm, 0, x);
  const Tensor out = ref.forward(cpu, x, StepInfo{});
  Tensor p = cpu.empty(out.shape(), DType::f32);
  cpu.ops().softmax(out, p);
  logits = out.to_floats();
  probs = p.to_floats();
}

TEST_F(GraphedBatchesTest, EveryBatchSizeAgreesWithTheCpuInF32AndBf16) {
  auto cpu = make_cpu_backend({});
  Model ref = resnet20();
  ref.to(*cpu, DType::f32);
  NormalizeAugment norm;
  for (int c = 0; c < 3; ++c) {
    norm.mean[c] = 0.45f + 0.02f * static_cast<float>(c);
    norm.std[c] = 0.25f;
  }
  for (auto [dtype, tol] : {std::pair{DType::f32, 1e-5}, std::pair{DType::bf16, 3e-2}}) {
    auto gpu = make_cuda_backend(0, BackendOptions{});
    Model m = resnet20();
    m.to(*gpu, dtype, gpu->preferred_layout(dtype));
    GraphedBatches batches(*gpu, m, 8, norm);
    EXPECT_EQ(batches.sizes(), (std::vector<int64_t>{1, 2, 4, 8}));
    const int recorded = batches.recordings();
    EXPECT_GE(recorded, 4) << "every batch size is recorded up front";
    // Sizes that are planned, padded (3, 5) and split (7 = 4 + 2 + 1 or padded to 8), twice:
    // the second round replays what the first recorded.
    for (int round = 0; round < 2; ++round)
      for (int64_t n : {1, 3, 5, 7, 8}) {
        const Tensor images = random_images(n, static_cast<uint32_t>(n * 10 + round));
        Tensor staged = batches.staging(n);
        std::memcpy(staged.raw(), images.raw(), images.nbytes());
        std::vector<float> logits, probs, ref_logits, ref_probs;
        batches.run(staged, logits, probs);
        cpu_reference(ref, *cpu, images, norm, ref_logits, ref_probs);
        ASSERT_EQ(logits.size(), ref_logits.size());
        EXPECT_LE(relative_difference(logits, ref_logits), tol) << "batch " << n << " round " << round;
        EXPECT_LE(relative_difference(probs, ref_probs), tol) << "batch " << n << " round " << round;
        // Unpinned host memory works as well (a single request's own tensor).
        std::vector<float> again, again_probs;
        batches.run(images, again, again_probs);
        EXPECT_EQ(again, logits) << "the same images give the same logits";
      }
    EXPECT_TRUE(batches.replaying());
    EXPECT_EQ(batches.recordings(), recorded) << "no batch size was recorded again while running";
  }
}

TEST_F(GraphedBatchesTest, F32InputIsTheModelsInputAsItIs) {
  auto cpu = make_cpu_backend({});
  auto gpu = make_cuda_backend(0, BackendOptions{});
  Model ref = resnet20();
  ref.to(*cpu, DType::f32);
  Model m = resnet20();
  m.to(*gpu, DType::bf16, gpu->preferred_layout(DType::bf16));
  GraphedBatches batches(*gpu, m, 4, NormalizeAugment{});
  std::vector<float> v(3 * 3 * 32 * 32);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (float& e : v) e = normal(rng);
  const Tensor x = Tensor::from_floats(v, {3, 3, 32, 32});
  std::vector<float> logits, probs;
  batches.run(x, logits, probs);
  EXPECT_LE(relative_difference(logits, ref.forward(*cpu, x, StepInfo{}).to_floats()), 3e-2);
}

TEST_F(GraphedBatchesTest, BatchesQueuedWhileOthersRunAnswerAsEachAlone) {
  // A server queues the next batch before the last one's results are read (two in flight), and
  // drops the staging as soon as submit() returns: every batch must still get its own results,
  // including padded passes that reuse one recording's input and output buffers back to back.
  auto gpu = make_cuda_backend(0, BackendOptions{});
  Model m = resnet20();
  m.to(*gpu, DType::bf16, gpu->preferred_layout(DType::bf16));
  GraphedBatches batches(*gpu, m, 8, NormalizeAugment{});
  const std::vector<int64_t> sizes{3, 3, 8, 1, 7, 5, 3};
  std::vector<std::vector<float>> alone(sizes.size()), alone_probs(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i)
    batches.run(random_images(sizes[i], static_cast<uint32_t>(100 + i)), alone[i], alone_probs[i]);
  for (size_t depth : {2u, 3u, 7u}) {
    std::vector<GraphedBatches::Pending> queued;
    size_t answered = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      Tensor staged = batches.staging(sizes[i]);
      const Tensor images = random_images(sizes[i], static_cast<uint32_t>(100 + i));
      std::memcpy(staged.raw(), images.raw(), images.nbytes());
      queued.push_back(batches.submit(staged));
      EXPECT_EQ(queued.back().rows(), sizes[i]);
      while (queued.size() - answered >= depth || (i + 1 == sizes.size() && answered < queued.size())) {
        std::vector<float> logits, probs;
        batches.finish(queued[answered], logits, probs);
        EXPECT_EQ(logits, alone[answered]) << "batch " << answered << " with " << depth << " in flight";
        EXPECT_EQ(probs, alone_probs[answered]) << "batch " << answered << " with " << depth << " in flight";
        ++answered;
      }
    }
    EXPECT_EQ(answered, sizes.size());
  }
  // A batch dropped without finish() waits for its copies, and later batches are unaffected.
  { GraphedBatches::Pending dropped = batches.submit(random_images(4, 1)); }
  std::vector<float> logits, probs;
  batches.run(random_images(sizes[0], 100), logits, probs);
  EXPECT_EQ(logits, alone[0]);
}

TEST_F(GraphedBatchesTest, ChannelsLastPixelsGiveWhatChannelsFirstGive) {
  // A client's [n, H, W, C] u8 pixels (tagged nhwc) are normalized on the GPU as they are.
  auto gpu = make_cuda_backend(0, BackendOptions{});
  Model m = resnet20();
  m.to(*gpu, DType::bf16, gpu->preferred_layout(DType::bf16));
  GraphedBatches batches(*gpu, m, 4, NormalizeAugment{});
  const int64_t n = 3;
  const Tensor nchw = random_images(n, 21);
  Tensor nhwc = batches.staging(n).with_layout(Layout::nhwc);
  for (int64_t s = 0; s < n; ++s)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < 32; ++y)
        for (int64_t x = 0; x < 32; ++x)
          nhwc.data<uint8_t>()[((s * 32 + y) * 32 + x) * 3 + c] = nchw.data<uint8_t>()[((s * 3 + c) * 32 + y) * 32 + x];
  std::vector<float> want, want_probs, got, got_probs;
  batches.run(nchw, want, want_probs);
  batches.run(nhwc, got, got_probs);
  EXPECT_EQ(got, want);
}

}  // namespace
