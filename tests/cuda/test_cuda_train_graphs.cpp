// Training steps replayed from CUDA graphs (TrainStep's recording) against the same steps op by
// op on the GPU and on the CPU; a new shape runs op by op, moved weights record anew, and the
// memory a graph replays into is never handed to anyone else while it lives.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/backends/cuda/cuda_allocator.h"
#include "engine/graph/model.h"
#include "engine/train/train_step.h"
#include "tests/model_step.h"

using namespace convoy;
using convoy::testing::relative_difference;

namespace {

class CudaTrainGraphs : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  }
};

Model resnet20() { return Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/resnet20.yaml", 11); }

TrainRecipe recipe() {
  TrainRecipe r;
  r.optimizer.type = "sgd";
  r.optimizer.lr = 0.05;
  r.optimizer.nesterov = true;
  r.optimizer.weight_decay = 5e-4;
  for (int c = 0; c < 3; ++c) r.augment.mean[c] = 0.5f, r.augment.std[c] = 0.25f;
  r.augment.crop_padding = 4;
  r.augment.horizontal_flip = true;
  r.label_smoothing = 0.1;
  r.seed = 9;
  return r;
}

struct HostBatch {
  Tensor images, labels;  // (N, 3, 32, 32) u8, (N) i32 on the CPU
};

HostBatch host_batch(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  HostBatch b{Tensor::empty({n, 3, 32, 32}, DType::u8), Tensor()};
  uint8_t* p = b.images.data<uint8_t>();
  for (int64_t i = 0; i < b.images.numel(); ++i) p[i] = static_cast<uint8_t>(rng());
  std::vector<int32_t> labels;
  for (int64_t i = 0; i < n; ++i) labels.push_back(static_cast<int32_t>(rng() % 10));
  b.labels = Tensor::from_ints(labels, {n});
  return b;
}

struct Trace {
  std::vector<float> losses;
  std::vector<bool> replayed;
  std::vector<float> weights;  // every parameter after the last step, concatenated
  int recordings = 0;
};

// Full batches of 16, a partial batch of 8 (an epoch's last) in the middle, then full ones again.
Trace train(Backend& be, DType dtype, Layout layout, bool record) {
  Model m = resnet20();
  m.to(be, dtype, layout);
  TrainStep step(be, m, recipe());
  step.set_recording(record);
  Trace t;
  const int64_t sizes[] = {16, 16, 16, 16, 8, 16, 16, 16};
  for (int64_t s = 0; s < 8; ++s) {
    const HostBatch b = host_batch(sizes[s], static_cast<uint32_t>(s % 3));
    const TrainStepOutput out = step.run(be.upload(b.images), be.upload(b.labels), s, 0.05);
    t.losses.push_back(out.loss.to_floats()[0]);
    t.replayed.push_back(step.last_run_replayed());
  }
  for (auto& [name, p] : m.parameters())
    for (float v : p->value.to_floats()) t.weights.push_back(v);
  t.recordings = step.recordings();
  return t;
}

TEST_F(CudaTrainGraphs, ReplayedStepsEqualTheOpByOpStepsAndTheCpu) {
  auto gpu = make_cuda_backend(0, BackendOptions{});
  auto cpu = make_cpu_backend({});
  const Trace on_cpu = train(*cpu, DType::f32, Layout::nchw, true);
  EXPECT_EQ(on_cpu.recordings, 0) << "the CPU records nothing";
  // tol: against the CPU's f32; same: against the GPU's own op-by-op steps (cuDNN's bf16 weight
  // gradients may sum in another order from one run to the next).
  for (auto [dtype, layout, tol, same] : {std::tuple{DType::f32, Layout::nchw, 1e-3, 1e-5},
                                          std::tuple{DType::bf16, Layout::nhwc, 5e-2, 2e-3}}) {
    SCOPED_TRACE(dtype == DType::f32 ? "f32" : "bf16 channels-last");
    const Trace plain = train(*gpu, dtype, layout, false);
    const Trace graphed = train(*gpu, dtype, layout, true);
    EXPECT_EQ(plain.recordings, 0);
    // A shape's first step runs op by op, its second records; the partial batch runs op by op
    // and lets the recording go, so the full shape after it is met anew.
    EXPECT_EQ(graphed.replayed, (std::vector<bool>{false, true, true, true, false, false, true, true}));
    EXPECT_EQ(graphed.recordings, 2);
    for (size_t s = 0; s < graphed.losses.size(); ++s) {
      EXPECT_NEAR(graphed.losses[s], plain.losses[s], same * std::abs(plain.losses[s])) << "step " << s;
      EXPECT_NEAR(graphed.losses[s], on_cpu.losses[s], tol * std::abs(on_cpu.losses[s])) << "step " << s;
    }
    EXPECT_LE(relative_difference(graphed.weights, plain.weights), 1e-5);
    EXPECT_LE(relative_difference(graphed.weights, on_cpu.weights), tol);
    EXPECT_GT(relative_difference(graphed.weights, on_cpu.weights), 0.0) << "the GPU's own arithmetic, not a copy";
  }
}

TEST_F(CudaTrainGraphs, WeightsThatMovedAreRecordedAnewNotReplayedStale) {
  auto gpu = make_cuda_backend(0, BackendOptions{});
  Model m = resnet20();
  m.to(*gpu, DType::f32);
  TrainStep step(*gpu, m, recipe());
  const HostBatch b = host_batch(16, 1);
  const Tensor images = gpu->upload(b.images), labels = gpu->upload(b.labels);
  for (int64_t s = 0; s < 3; ++s) step.run(images, labels, s, 0.05);
  ASSERT_TRUE(step.last_run_replayed());
  ASSERT_EQ(step.recordings(), 1);
  m.to(*gpu, DType::f32);  // new gradient buffers: the recording wrote into the old ones
  const TrainStepOutput out = step.run(images, labels, 3, 0.05);
  EXPECT_TRUE(step.last_run_replayed());
  EXPECT_EQ(step.recordings(), 2);
  // The new buffers hold this step's gradients (the old recording would have left them zero).
  double norm = 0;
  for (auto& [name, p] : m.parameters())
    for (float v : p->grad.to_floats()) norm += double(v) * v;
  EXPECT_GT(norm, 0.0);
  EXPECT_TRUE(std::isfinite(out.loss.to_floats()[0]));
}

TEST_F(CudaTrainGraphs, ABlockARecordingHandedOutIsNotReusedWhileTheGraphLives) {
  auto gpu = make_cuda_backend(0, BackendOptions{});
  auto* alloc = dynamic_cast<cuda::CudaAllocator*>(gpu->allocator().get());
  ASSERT_NE(alloc, nullptr);
  Tensor kept;  // as a layer keeps a tensor of its last training forward
  std::unique_ptr<RecordedWork> work = gpu->record([&] {
    kept = gpu->empty({1 << 16}, DType::f32);
    gpu->ops().fill(kept, 1.0f);
  });
  ASSERT_TRUE(work);
  const void* block = kept.raw();
  kept = Tensor();  // a plain forward replaces it: the graph still writes there
  std::vector<Tensor> others;
  for (int i = 0; i < 4; ++i) {
    others.push_back(gpu->empty({1 << 16}, DType::f32));
    EXPECT_NE(others.back().raw(), block) << "handed out while a graph replays into it";
  }
  work.reset();
  bool reused = false;
  for (int i = 0; i < 4 && !reused; ++i) {
    others.push_back(gpu->empty({1 << 16}, DType::f32));
    reused = others.back().raw() == block;
  }
  EXPECT_TRUE(reused) << "once the graph is gone the block is an ordinary free one";
}

TEST_F(CudaTrainGraphs, CudaGraphsOffInTheEnvironmentRunsOpByOp) {
  auto gpu = make_cuda_backend(0, BackendOptions{});
  Model m = resnet20();
  m.to(*gpu, DType::f32);
  setenv("CONVOY_CUDA_GRAPHS", "0", 1);
  TrainStep step(*gpu, m, recipe());
  unsetenv("CONVOY_CUDA_GRAPHS");
  const HostBatch b = host_batch(8, 2);
  const Tensor images = gpu->upload(b.images), labels = gpu->upload(b.labels);
  for (int64_t s = 0; s < 3; ++s) step.run(images, labels, s, 0.05);
  EXPECT_FALSE(step.last_run_replayed());
  EXPECT_EQ(step.recordings(), 0);
}

}  // namespace
