// GPU inference replayed from CUDA graphs (GraphedForward) against the op-by-op forward and
// the CPU's; a new shape, new weights or a moved scratch buffer records anew.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/backends/cuda/cuda_allocator.h"
#include "engine/graph/model.h"
#include "engine/inference/graphed_forward.h"
#include "tests/model_step.h"

using namespace convoy;
using convoy::testing::relative_difference;

namespace {

class CudaGraphs : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  }
};

Tensor random_batch(Backend& be, const Shape& shape, uint32_t seed, DType dtype, Layout layout) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (float& e : v) e = normal(rng);
  Tensor x = be.empty(shape, dtype, layout);
  be.ops().cast(be.upload(Tensor::from_floats(v, shape)), x);
  return x;
}

Model resnet20() {
  return Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/resnet20.yaml", 11);
}

TEST_F(CudaGraphs, ReplayEqualsTheOpByOpForwardAndTheCpu) {
  auto gpu = make_cuda_backend(0, BackendOptions{});
  auto cpu = make_cpu_backend({});
  Model m = resnet20();
  Model ref = resnet20();
  ref.to(*cpu, DType::f32);
  for (auto [dtype, layout, tol] : {std::tuple{DType::f32, Layout::nchw, 1e-5}, std::tuple{DType::bf16, Layout::nhwc, 3e-2}}) {
    m.to(*gpu, dtype, layout);
    GraphedForward graphed(*gpu, m);
    for (uint32_t seed : {1u, 2u, 3u}) {  // several inputs through the same recording
      const Tensor x = random_batch(*gpu, {4, 3, 32, 32}, seed, dtype, layout);
      const std::vector<float> plain = m.forward(*gpu, x, StepInfo{}).to_floats();
      const std::vector<float> replayed = graphed.run(x).to_floats();
      EXPECT_TRUE(graphed.last_run_replayed());
      EXPECT_EQ(relative_difference(replayed, plain), 0.0) << "a replay is the same kernels on the same data";
      const std::vector<float> on_cpu = ref.forward(*cpu, random_batch(*cpu, {4, 3, 32, 32}, seed, DType::f32, Layout::nchw), StepInfo{}).to_floats();
      EXPECT_LE(relative_difference(replayed, on_cpu), tol);
    }
    EXPECT_EQ(graphed.recordings(), 1);
  }
}

// Upsampling (nearest and bilinear) and softmax over channels inside a recorded forward: the
// replay is the op-by-op forward, and agrees with the CPU (oneDNN's resampling and softmax) in
// f32 nchw and bf16 nhwc.
TEST_F(CudaGraphs, UpsampleAndSoftmaxReplayAndAgreeWithTheCpu) {
  constexpr const char* kYaml = R"(name: upsample_softmax
input: [3, 6, 5]
layers:
  - {name: c1, type: conv2d, out_channels: 8, kernel: 3, padding: 1}
  - {name: up, type: upsample, scale: 2}
  - {name: c2, type: conv2d, out_channels: 8, kernel: 3, padding: 1}
  - {name: bi, type: upsample, mode: bilinear, size: [17, 9]}
  - {name: sm, type: softmax}
  - {name: gap, type: global_avg_pool}
  - {name: fc, type: linear, out_features: 4}
  - {name: probs, type: softmax}
)";
  auto gpu = make_cuda_backend(0, BackendOptions{});
  auto cpu = make_cpu_backend({});
  Model m = Model::from_yaml(kYaml, "upsample_softmax.yaml", 3);
  Model ref = Model::from_yaml(kYaml, "upsample_softmax.yaml", 3);
  ref.to(*cpu, DType::f32);
  for (auto [dtype, layout, tol] :
       {std::tuple{DType::f32, Layout::nchw, 1e-5}, std::tuple{DType::bf16, Layout::nhwc, 3e-2}}) {
    m.to(*gpu, dtype, layout);
    GraphedForward graphed(*gpu, m);
    const Tensor x = random_batch(*gpu, {2, 3, 6, 5}, 7, dtype, layout);
    const std::vector<float> plain = m.forward(*gpu, x, StepInfo{}).to_floats();
    const std::vector<float> replayed = graphed.run(x).to_floats();
    EXPECT_TRUE(graphed.last_run_replayed());
    EXPECT_EQ(relative_difference(replayed, plain), 0.0);
    const Tensor xc = random_batch(*cpu, {2, 3, 6, 5}, 7, DType::f32, Layout::nchw);
    EXPECT_LE(relative_difference(replayed, ref.forward(*cpu, xc, StepInfo{}).to_floats()), tol);
  }
}

TEST_F(CudaGraphs, ANewShapeOrNewWeightsRecordAnew) {
  auto gpu = make_cuda_backend(0, BackendOptions{});
  Model m = resnet20();
  m.to(*gpu, DType::f32);
  GraphedForward graphed(*gpu, m);
  const Tensor b4 = random_batch(*gpu, {4, 3, 32, 32}, 1, DType::f32, Layout::nchw);
  const Tensor b1 = random_batch(*gpu, {1, 3, 32, 32}, 2, DType::f32, Layout::nchw);
  graphed.run(b4);
  EXPECT_EQ(graphed.recordings(), 1);
  // Batch 1 is another graph; its logits are batch 1's, not a stale batch 4's.
  EXPECT_EQ(graphed.run(b1).to_floats(), m.forward(*gpu, b1, StepInfo{}).to_floats());
  EXPECT_EQ(graphed.recordings(), 2);
  graphed.run(b4);
  EXPECT_EQ(graphed.recordings(), 2) << "batch 4 replays its own recording";
  // New weights (load_state writes through the same buffers, but the version moves on).
  std::vector<NamedTensor> state;
  for (NamedTensor& t : m.state()) {
    std::vector<float> v = t.tensor.to_floats();
    for (float& e : v) e *= 0.5f;
    state.push_back({t.name, Tensor::from_floats(v, t.tensor.shape())});
  }
  m.load_state(state, "halved");
  const std::vector<float> after = graphed.run(b4).to_floats();
  EXPECT_EQ(graphed.recordings(), 3);
  EXPECT_EQ(after, m.forward(*gpu, b4, StepInfo{}).to_floats());
}

TEST_F(CudaGraphs, AScratchBufferOutgrownByALargerBatchInvalidatesOlderRecordings) {
  auto gpu = make_cuda_backend(0, BackendOptions{});
  Model m = resnet20();
  m.to(*gpu, DType::f32);
  GraphedForward graphed(*gpu, m);
  const Tensor small = random_batch(*gpu, {2, 3, 32, 32}, 1, DType::f32, Layout::nchw);
  graphed.run(small);
  auto* alloc = dynamic_cast<cuda::CudaAllocator*>(gpu->allocator().get());
  ASSERT_NE(alloc, nullptr);
  const uint64_t epoch = alloc->buffers_epoch();
  // A much larger training step grows the backend's scratch and workspace buffers.
  const Tensor big = random_batch(*gpu, {256, 3, 32, 32}, 3, DType::f32, Layout::nchw);
  const Tensor logits = m.forward(*gpu, big, StepInfo{true, 1});
  m.backward(*gpu, logits);
  ASSERT_NE(alloc->buffers_epoch(), epoch) << "the larger step was meant to move a scratch buffer";
  const std::vector<float> again = graphed.run(small).to_floats();
  EXPECT_EQ(graphed.recordings(), 2) << "the recording that pointed at the old buffer is not replayed";
  EXPECT_EQ(again, m.forward(*gpu, small, StepInfo{}).to_floats());
}

}  // namespace
