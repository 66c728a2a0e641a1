// Training steps replayed from CUDA graphs (TrainStep's recording) against the same steps op by
// op; a new shape runs op by op, moved weights record anew, and the memory a graph replays into
// is never handed to anyone else while it lives.
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

// With deterministic algorithms a replay is the op-by-op step bit for bit, step after step
// (cuDNN's fastest weight-gradient algorithms add in a varying order, and training amplifies
// that in a few steps). The op-by-op GPU step is checked against the CPU's elsewhere
// (CudaTraining, CudaLayout).
TEST_F(CudaTrainGraphs, ReplayedStepsAreTheOpByOpStepsBitForBit) {
  BackendOptions options;
  options.deterministic = true;
  auto gpu = make_cuda_backend(0, options);
  for (auto [dtype, layout] : {std::pair{DType::f32, Layout::nchw}, std::pair{DType::bf16, Layout::nhwc}}) {
    SCOPED_TRACE(dtype == DType::f32 ? "f32" : "bf16 channels-last");
    const Trace plain = train(*gpu, dtype, layout, false);
    const Trace graphed = train(*gpu, dtype, layout, true);
    EXPECT_EQ(plain.recordings, 0);
    // A shape's first step runs op by op, its second records; the partial batch runs op by op
    // and lets the recording go, so the full shape after it is met anew.
    EXPECT_EQ(graphed.replayed, (std::vector<bool>{false, true, true, true, false, false, true, true}));
    EXPECT_EQ(graphed.recordings, 2);
    EXPECT_EQ(graphed.losses, plain.losses);
    EXPECT_EQ(graphed.weights, plain.weights);
  }
}

// One step from the same weights, op by op and replayed, with deterministic algorithms: the
// same kernels on the same data give the same loss and gradients, bit for bit.
TEST_F(CudaTrainGraphs, AReplayedStepIsTheOpByOpStepBitForBit) {
  BackendOptions options;
  options.deterministic = true;
  auto gpu = make_cuda_backend(0, options);
  for (auto [dtype, layout] : {std::pair{DType::f32, Layout::nchw}, std::pair{DType::bf16, Layout::nhwc}}) {
    SCOPED_TRACE(dtype == DType::f32 ? "f32" : "bf16 channels-last");
    Model a = resnet20(), b = resnet20();
    a.to(*gpu, dtype, layout);
    b.to(*gpu, dtype, layout);
    TrainStep plain(*gpu, a, recipe()), graphed(*gpu, b, recipe());
    plain.set_recording(false);
    for (int64_t s = 0; s < 3; ++s) {
      const HostBatch batch = host_batch(16, static_cast<uint32_t>(s));
      const Tensor images = gpu->upload(batch.images), labels = gpu->upload(batch.labels);
      const float la = plain.run(images, labels, s, 0.05).loss.to_floats()[0];
      const float lb = graphed.run(images, labels, s, 0.05).loss.to_floats()[0];
      EXPECT_EQ(graphed.last_run_replayed(), s > 0) << "step " << s;
      EXPECT_EQ(la, lb) << "step " << s;
      auto pa = a.parameters(), pb = b.parameters();
      for (size_t i = 0; i < pa.size(); ++i) {
        const double d = relative_difference(pb[i].second->grad.to_floats(), pa[i].second->grad.to_floats());
        EXPECT_EQ(d, 0.0) << "step " << s << ": the gradient of " << pa[i].first;
        if (d != 0.0) break;  // the first one names the layer
      }
    }
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

TEST_F(CudaTrainGraphs, CudaGraphsOffRunsOpByOp) {  // EngineOptions::cuda_graphs, CONVOY_CUDA_GRAPHS=0
  auto gpu = make_cuda_backend(0, BackendOptions{});
  Model m = resnet20();
  m.to(*gpu, DType::f32);
  TrainStep step(*gpu, m, recipe());
  step.set_recording(false);
  const HostBatch b = host_batch(8, 2);
  const Tensor images = gpu->upload(b.images), labels = gpu->upload(b.labels);
  for (int64_t s = 0; s < 3; ++s) step.run(images, labels, s, 0.05);
  EXPECT_FALSE(step.last_run_replayed());
  EXPECT_EQ(step.recordings(), 0);
}

}  // namespace

// TrainStep::prepare (the trainer calls it before its clock): it makes the plans and the
// recording on a batch of zeros and leaves every tensor a step carries over as it was, so a
// run that prepared takes the same steps, bit for bit, as one that did not, replaying from its
// first step on.
TEST_F(CudaTrainGraphs, APreparedStepChangesNothingAndReplaysFromTheFirstStep) {
  BackendOptions options;
  options.deterministic = true;
  auto gpu = make_cuda_backend(0, options);
  Model a = resnet20(), b = resnet20();
  a.to(*gpu, DType::bf16, Layout::nhwc);
  b.to(*gpu, DType::bf16, Layout::nhwc);
  TrainStep plain(*gpu, a, recipe()), prepared(*gpu, b, recipe());
  ASSERT_TRUE(prepared.prepare(16));
  EXPECT_EQ(prepared.recordings(), 1);
  const std::vector<NamedTensor> sa = a.state(), sb = b.state();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i)
    ASSERT_EQ(sb[i].tensor.to_floats(), sa[i].tensor.to_floats()) << sa[i].name << " moved in prepare()";
  for (auto& [name, p] : b.parameters())
    for (float v : p->grad.to_floats()) ASSERT_EQ(v, 0.0f) << "the gradient of " << name << " is left behind";
  for (int64_t s = 0; s < 3; ++s) {
    const HostBatch batch = host_batch(16, static_cast<uint32_t>(s));
    const Tensor images = gpu->upload(batch.images), labels = gpu->upload(batch.labels);
    const float la = plain.run(images, labels, s, 0.05).loss.to_floats()[0];
    const float lb = prepared.run(images, labels, s, 0.05).loss.to_floats()[0];
    EXPECT_TRUE(prepared.last_run_replayed()) << "step " << s;
    EXPECT_EQ(la, lb) << "step " << s;
  }
  EXPECT_EQ(prepared.recordings(), 1);
  const std::vector<NamedTensor> ta = a.state(), tb = b.state();
  for (size_t i = 0; i < ta.size(); ++i) EXPECT_EQ(tb[i].tensor.to_floats(), ta[i].tensor.to_floats()) << ta[i].name;
}
