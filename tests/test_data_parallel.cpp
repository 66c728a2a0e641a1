// Data parallelism on the CPU: the distributed sampler's shards (disjoint, covering, equal,
// deterministic, new each epoch, the global batches of one process at W times the batch), and
// a simulated world of threads whose averaged 2-rank step gives the weights of one process's
// step on the combined batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <thread>

#include "datasets/loader.h"
#include "engine/backends/backend.h"
#include "engine/distributed/communicator.h"
#include "engine/graph/model.h"
#include "engine/train/data_parallel.h"
#include "engine/bundle/evaluate.h"
#include "engine/train/train_step.h"

using namespace convoy;

namespace {

// Sample i has label i (mod 7) and pixels i, so a served batch can be traced back by its pixels.
std::unique_ptr<TensorDataset> traced_dataset(int64_t n) {
  Tensor images = Tensor::empty({n, 1, 1, 2}, DType::u8);  // (N, C, H, W)
  Tensor labels = Tensor::empty({n}, DType::i32);          // (N)
  for (int64_t i = 0; i < n; ++i) {
    images.data<uint8_t>()[2 * i] = static_cast<uint8_t>(i % 256);
    images.data<uint8_t>()[2 * i + 1] = static_cast<uint8_t>(i / 256);
    labels.data<int32_t>()[i] = static_cast<int32_t>(i % 7);
  }
  std::vector<std::string> names;
  for (int c = 0; c < 7; ++c) names.push_back("c" + std::to_string(c));
  return std::make_unique<TensorDataset>("traced", names, images, labels);
}

LoaderOptions sharded(int64_t batch, int64_t rank, int64_t ranks, uint64_t seed = 7) {
  LoaderOptions o;
  o.batch_size = batch;
  o.shuffle = true;
  o.drop_last = true;
  o.seed = seed;
  o.workers = 2;
  o.preprocess.channels = 1;
  o.preprocess.height = 1;
  o.preprocess.width = 2;
  o.shard_rank = rank;
  o.shard_count = ranks;
  return o;
}

// The samples of each batch the loader serves in `epoch`, read from the pixels.
std::vector<std::vector<int64_t>> served(DataLoader& loader, int64_t epoch) {
  loader.start_epoch(epoch);
  std::vector<std::vector<int64_t>> out;
  Batch b;
  while (loader.next(b)) {
    std::vector<int64_t> ids;
    for (int64_t r = 0; r < b.images.dim(0); ++r)
      ids.push_back(b.images.data<uint8_t>()[2 * r] + 256 * b.images.data<uint8_t>()[2 * r + 1]);
    out.push_back(ids);
  }
  return out;
}

}  // namespace

TEST(DistributedSampler, ShardsAreDisjointEqualAndCoverTheEpoch) {
  const int64_t n = 103;
  const auto ds = traced_dataset(n);
  DataLoader whole(*ds, sharded(1, 0, 1));
  for (int64_t ranks : {1, 2, 3, 4, 8}) {
    for (int64_t epoch : {0, 1}) {
      const std::vector<int64_t> global = whole.epoch_order(epoch);
      std::set<int64_t> seen;
      for (int64_t r = 0; r < ranks; ++r) {
        DataLoader loader(*ds, sharded(5, r, ranks));
        const std::vector<int64_t> shard = loader.epoch_order(epoch);
        EXPECT_EQ(static_cast<int64_t>(shard.size()), n / ranks) << ranks << " ranks";  // drop_last: equal
        EXPECT_EQ(loader.batches_per_epoch(), n / ranks / 5);
        for (int64_t s : shard) EXPECT_TRUE(seen.insert(s).second) << "sample " << s << " in two shards";
        // PyTorch's DistributedSampler: every ranks-th sample of the epoch's order, from `r`.
        for (size_t i = 0; i < shard.size(); ++i) EXPECT_EQ(shard[i], global[i * ranks + r]);
        EXPECT_EQ(loader.epoch_order(epoch), shard);  // deterministic
      }
      // Covering: all but the n mod ranks samples the epoch's order ends with.
      EXPECT_EQ(static_cast<int64_t>(seen.size()), n / ranks * ranks);
      for (int64_t i = 0; i < n / ranks * ranks; ++i) EXPECT_TRUE(seen.count(global[i]));
    }
  }
}

TEST(DistributedSampler, EachEpochIsANewShuffleAndTheSeedDecides) {
  const auto ds = traced_dataset(64);
  DataLoader a(*ds, sharded(4, 1, 2)), b(*ds, sharded(4, 1, 2)), other_seed(*ds, sharded(4, 1, 2, 8));
  EXPECT_NE(a.epoch_order(0), a.epoch_order(1));
  EXPECT_EQ(a.epoch_order(3), b.epoch_order(3));
  EXPECT_NE(a.epoch_order(0), other_seed.epoch_order(0));
}

TEST(DistributedSampler, RanksTogetherServeTheGlobalBatchesOfOneProcess) {
  // Batch b of every rank together is batch b of one process at ranks x the batch: the same
  // samples per optimizer step, so a data-parallel run sees what a single-GPU run would.
  const int64_t n = 250, batch = 6;
  const auto ds = traced_dataset(n);
  for (int64_t ranks : {2, 3}) {
    DataLoader single(*ds, sharded(batch * ranks, 0, 1));
    const auto global = served(single, 2);
    std::vector<std::vector<std::vector<int64_t>>> per_rank;
    for (int64_t r = 0; r < ranks; ++r) {
      DataLoader loader(*ds, sharded(batch, r, ranks));
      per_rank.push_back(served(loader, 2));
      EXPECT_EQ(per_rank.back().size(), global.size());
    }
    for (size_t b = 0; b < global.size(); ++b) {
      std::vector<int64_t> together;
      for (const auto& rank_batches : per_rank)
        together.insert(together.end(), rank_batches[b].begin(), rank_batches[b].end());
      std::vector<int64_t> expected = global[b];
      std::sort(together.begin(), together.end());
      std::sort(expected.begin(), expected.end());
      EXPECT_EQ(together, expected) << "batch " << b << " of " << ranks << " ranks";
    }
  }
}

TEST(DistributedSampler, AShardThatDoesNotExistIsRefused) {
  const auto ds = traced_dataset(10);
  EXPECT_THROW(DataLoader(*ds, sharded(2, 2, 2)), InputError);
  EXPECT_THROW(DataLoader(*ds, sharded(2, 0, 0)), InputError);
}

namespace {

// No batch norm and no dropout: a step's gradient is the mean of per-sample gradients.
constexpr const char* kNet = R"(name: tiny
input: [1, 6, 6]
classes: 4
layers:
  - {name: conv1, type: conv2d, out_channels: 3, kernel: 3}
  - {name: relu1, type: relu}
  - {name: flatten, type: flatten}
  - {name: fc1, type: linear, out_features: 8}
  - {name: relu2, type: relu}
  - {name: fc2, type: linear, out_features: 4}
)";

// Batch norm after each layer: per GPU its statistics are each rank's, synchronized the whole batch's.
constexpr const char* kBnNet = R"(name: tiny_bn
input: [1, 6, 6]
classes: 4
layers:
  - {name: conv1, type: conv2d, out_channels: 3, kernel: 3, bias: false}
  - {name: bn1, type: batchnorm2d}
  - {name: relu1, type: relu}
  - {name: flatten, type: flatten}
  - {name: fc1, type: linear, out_features: 8}
  - {name: relu2, type: relu}
  - {name: fc2, type: linear, out_features: 4}
)";

constexpr int64_t kBatch = 8, kSteps = 3;

struct Data {
  std::vector<Tensor> images;  // per step (kBatch, 1, 6, 6) u8
  std::vector<Tensor> labels;  // per step (kBatch) i32
};

Data make_data() {
  std::mt19937 rng(11);
  Data d;
  for (int64_t s = 0; s < kSteps; ++s) {
    Tensor x = Tensor::empty({kBatch, 1, 6, 6}, DType::u8);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<uint8_t>()[i] = static_cast<uint8_t>(rng() % 256);
    Tensor y = Tensor::empty({kBatch}, DType::i32);
    for (int64_t i = 0; i < kBatch; ++i) y.data<int32_t>()[i] = static_cast<int32_t>(rng() % 4);
    d.images.push_back(x);
    d.labels.push_back(y);
  }
  return d;
}

TrainRecipe recipe(bool sync_bn = false) {
  OptimizerConfig opt;
  opt.lr = 0.05;
  opt.momentum = 0.9;
  opt.weight_decay = 1e-3;
  return TrainRecipe{opt, make_normalize({0.5}, {0.25}), 0.0, 5, sync_bn};
}

struct Trained {
  std::vector<std::vector<float>> weights;  // per parameter
  std::vector<float> losses;                // per step, as run() reports it
  size_t buckets = 0, launched_early = 0;
};

// kSteps steps of `rows` [begin, end) of each step's batch, on one rank of `comm`'s world (or
// alone with comm null).
Trained train_rows(Communicator* comm, int64_t begin, int64_t end, const Data& data, int64_t bucket_bytes,
                   const char* net = kNet, bool sync_bn = false) {
  BackendOptions bo;
  bo.threads = 1;
  std::unique_ptr<Backend> backend = make_cpu_backend(bo);
  Model model = Model::from_yaml(net, "tiny.yaml", 3);
  model.to(*backend, DType::f32);
  TrainStep step(*backend, model, recipe(sync_bn), comm, bucket_bytes);
  step.sync_from_rank0();
  Trained t;
  for (int64_t s = 0; s < kSteps; ++s) {
    const TrainStepOutput out = step.run(data.images[static_cast<size_t>(s)].slice_rows(begin, end),
                                         data.labels[static_cast<size_t>(s)].slice_rows(begin, end), s, 0.05);
    t.losses.push_back(out.loss.to_floats()[0]);
  }
  for (const NamedTensor& s : model.state()) t.weights.push_back(s.tensor.to_floats());  // buffers too
  if (step.reducer()) {
    t.buckets = step.reducer()->buckets().size();
    t.launched_early = step.reducer()->launched_during_backward();
  }
  return t;
}

double max_rel_diff(const Trained& a, const Trained& b) {
  double worst = 0;
  for (size_t p = 0; p < a.weights.size(); ++p)
    for (size_t i = 0; i < a.weights[p].size(); ++i)
      worst = std::max(worst, std::abs(static_cast<double>(a.weights[p][i]) - b.weights[p][i]) /
                                  (1e-3 + std::abs(static_cast<double>(b.weights[p][i]))));
  return worst;
}

}  // namespace

TEST(SimulatedWorld, TwoRankStepsEqualOneProcessOnTheCombinedBatch) {
  const Data data = make_data();
  const Trained single = train_rows(nullptr, 0, kBatch, data, kDefaultBucketBytes);
  auto world = make_thread_world(2);
  Trained ranks[2];
  // Small buckets (256 bytes), so that the gradients go out in several, some during backward.
  std::thread t1([&] { ranks[1] = train_rows(world[1].get(), kBatch / 2, kBatch, data, 256); });
  ranks[0] = train_rows(world[0].get(), 0, kBatch / 2, data, 256);
  t1.join();
  EXPECT_LT(max_rel_diff(ranks[0], single), 1e-4);
  EXPECT_EQ(ranks[0].weights, ranks[1].weights);  // every rank holds the same weights
  for (int64_t s = 0; s < kSteps; ++s) {
    EXPECT_NEAR(ranks[0].losses[s], single.losses[s], 1e-5 * (1 + std::abs(single.losses[s])));  // the global loss
    EXPECT_EQ(ranks[0].losses[s], ranks[1].losses[s]);
  }
  EXPECT_GT(ranks[0].buckets, 2u);
  EXPECT_GT(ranks[0].launched_early, 0u);  // reduced while backward went on
  // The test can tell: one rank's half alone trains other weights.
  const Trained half = train_rows(nullptr, 0, kBatch / 2, data, kDefaultBucketBytes);
  EXPECT_GT(max_rel_diff(half, single), 1e-3);
}

TEST(SimulatedWorld, RankZerosWeightsWinAtTheStart) {
  auto world = make_thread_world(2);
  std::vector<float> got[2];
  auto run = [&](int r) {
    std::unique_ptr<Backend> backend = make_cpu_backend({});
    Model model = Model::from_yaml(kNet, "tiny.yaml", 100 + r);  // each rank its own init
    model.to(*backend, DType::f32);
    TrainStep step(*backend, model, recipe(), world[r].get());
    step.sync_from_rank0();
    got[r] = model.parameters()[0].second->value.to_floats();
  };
  std::thread t1(run, 1);
  run(0);
  t1.join();
  EXPECT_EQ(got[0], got[1]);
  Model reference = Model::from_yaml(kNet, "tiny.yaml", 100);
  EXPECT_EQ(got[0], reference.parameters()[0].second->value.to_floats());
}

// TrainStep::prepare runs a GPU step ahead of the clock; on the CPU, and with several ranks
// (whose collectives it would start alone), it does nothing.
TEST(SimulatedWorld, NoStepIsPreparedOnTheCpuOrWithSeveralRanks) {
  auto world = make_thread_world(2);
  bool prepared[2] = {true, true};
  std::vector<float> before, after;
  auto run = [&](int r) {
    std::unique_ptr<Backend> backend = make_cpu_backend({});
    Model model = Model::from_yaml(kNet, "tiny.yaml", 5);
    model.to(*backend, DType::f32);
    TrainStep step(*backend, model, recipe(), world[r].get());
    prepared[r] = step.prepare(4);
  };
  std::thread t1(run, 1);
  run(0);
  t1.join();
  EXPECT_FALSE(prepared[0]);
  EXPECT_FALSE(prepared[1]);
  std::unique_ptr<Backend> backend = make_cpu_backend({});
  Model model = Model::from_yaml(kNet, "tiny.yaml", 5);
  model.to(*backend, DType::f32);
  TrainStep alone(*backend, model, recipe());
  for (const NamedTensor& t : model.state()) for (float v : t.tensor.to_floats()) before.push_back(v);
  EXPECT_FALSE(alone.prepare(4));
  for (const NamedTensor& t : model.state()) for (float v : t.tensor.to_floats()) after.push_back(v);
  EXPECT_EQ(before, after);
  EXPECT_EQ(alone.recordings(), 0);
}

TEST(SimulatedWorld, AnyIsTrueWhenOneRankSaysSo) {
  auto world = make_thread_world(3);
  bool answers[3][2];
  auto run = [&](int r) {
    std::unique_ptr<Backend> backend = make_cpu_backend({});
    answers[r][0] = world[r]->any(*backend, r == 2);
    answers[r][1] = world[r]->any(*backend, false);
  };
  std::thread t1(run, 1), t2(run, 2);
  run(0);
  t1.join();
  t2.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(answers[r][0]);
    EXPECT_FALSE(answers[r][1]);
  }
}

TEST(SimulatedWorld, CountersComeFromRankZero) {
  auto world = make_thread_world(2);
  int64_t values[2][3] = {{7, int64_t{1} << 40, 123456789012}, {0, 0, 0}};
  auto run = [&](int r) {
    std::unique_ptr<Backend> backend = make_cpu_backend({});
    share_from_rank0(*world[r], *backend, {&values[r][0], &values[r][1], &values[r][2]});
  };
  std::thread t1(run, 1);
  run(0);
  t1.join();
  EXPECT_EQ(values[1][0], 7);
  EXPECT_EQ(values[1][1], int64_t{1} << 40);
  EXPECT_EQ(values[1][2], 123456789012);
  EXPECT_EQ(values[0][2], 123456789012);
}

TEST(DataParallelResume, TheEpochPositionIsConvertedToTheNewGlobalBatch) {
  EXPECT_EQ(resume_batch(10, 0, 128), 10);     // not recorded: as it is
  EXPECT_EQ(resume_batch(10, 128, 128), 10);   // the same world
  EXPECT_EQ(resume_batch(10, 128, 64), 20);    // 1280 samples done: 20 batches of 64
  EXPECT_EQ(resume_batch(11, 64, 128), 5);     // 704 samples: 5 whole batches of 128 (64 seen again)
}

TEST(SimulatedWorld, SyncBatchNormTwoRanksEqualOneProcessOnTheCombinedBatch) {
  const Data data = make_data();
  const Trained single = train_rows(nullptr, 0, kBatch, data, kDefaultBucketBytes, kBnNet);
  Trained synced[2], per_gpu[2];
  {
    auto world = make_thread_world(2);
    std::thread t1([&] { synced[1] = train_rows(world[1].get(), kBatch / 2, kBatch, data, 256, kBnNet, true); });
    synced[0] = train_rows(world[0].get(), 0, kBatch / 2, data, 256, kBnNet, true);
    t1.join();
  }
  {
    auto world = make_thread_world(2);
    std::thread t1([&] { per_gpu[1] = train_rows(world[1].get(), kBatch / 2, kBatch, data, 256, kBnNet, false); });
    per_gpu[0] = train_rows(world[0].get(), 0, kBatch / 2, data, 256, kBnNet, false);
    t1.join();
  }
  // Weights and running statistics: synchronized batch norm is one process's batch norm.
  EXPECT_LT(max_rel_diff(synced[0], single), 1e-4);
  EXPECT_LT(max_rel_diff(synced[1], single), 1e-4);
  for (int64_t s = 0; s < kSteps; ++s)
    EXPECT_NEAR(synced[0].losses[s], single.losses[s], 1e-5 * (1 + std::abs(single.losses[s])));
  // Per GPU, each rank normalizes with its half's statistics: other weights.
  EXPECT_GT(max_rel_diff(per_gpu[0], single), 1e-3);
}
