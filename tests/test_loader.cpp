// DataLoader: coverage, reproducible order and crops whatever the workers, resume mid-epoch,
// bad samples, bounded prefetch, shutdown.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "datasets/loader.h"
#include "engine/core/counter_rng.h"
#include "engine/core/error.h"

using namespace convoy;

namespace {

// Sample i has label i and pixels (i + k) mod 256, so a batch row can be traced back.
std::unique_ptr<TensorDataset> numbered_dataset(int64_t n, int64_t c = 1, int64_t h = 2, int64_t w = 3) {
  Tensor images = Tensor::empty({n, c, h, w}, DType::u8);  // (N, C, H, W)
  Tensor labels = Tensor::empty({n}, DType::i32);          // (N)
  std::vector<std::string> names;
  const int64_t row = c * h * w;
  for (int64_t i = 0; i < n; ++i) {
    labels.data<int32_t>()[i] = static_cast<int32_t>(i);
    names.push_back(std::to_string(i));
    for (int64_t k = 0; k < row; ++k) images.data<uint8_t>()[i * row + k] = static_cast<uint8_t>(i + k);
  }
  return std::make_unique<TensorDataset>("numbered", names, images, labels);
}

LoaderOptions options(const Dataset& ds, int64_t batch, bool shuffle, bool drop_last, uint64_t seed,
                      int64_t workers = 1) {
  LoaderOptions o;
  o.batch_size = batch;
  o.shuffle = shuffle;
  o.drop_last = drop_last;
  o.seed = seed;
  o.workers = workers;
  const Shape shape = ds.stored_shape().value_or(Shape{1, 1, 1});
  o.preprocess.channels = shape[0];
  o.preprocess.height = shape[1];
  o.preprocess.width = shape[2];
  return o;
}

// Sample i's pixels are its seed's bytes and its label is i; samples listed in `bad` cannot be
// read; every load takes a random few microseconds so that workers finish out of order.
class SeededDataset : public Dataset {
 public:
  SeededDataset(int64_t n, std::set<int64_t> bad = {})
      : Dataset("seeded", std::vector<std::string>(static_cast<size_t>(n), "c")), n_(n), bad_(std::move(bad)) {}
  int64_t size() const override { return n_; }
  int32_t label(int64_t i) const override { return static_cast<int32_t>(i); }
  void load(int64_t i, const Preprocess& p, SampleMode, uint64_t seed, uint8_t* out) const override {
    loads_.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds(counter_hash(seed, 1) % 200));
    if (bad_.count(i)) throw BadSampleError("sample" + std::to_string(i) + ".jpg: not a JPEG or PNG image");
    const int64_t bytes = p.channels * p.height * p.width;
    for (int64_t k = 0; k < bytes; ++k) out[k] = static_cast<uint8_t>(counter_hash(seed, static_cast<uint64_t>(k)));
  }
  mutable std::atomic<int64_t> loads_{0};

 private:
  int64_t n_;
  std::set<int64_t> bad_;
};

// Every batch of an epoch, pixels and labels, as plain vectors.
std::vector<std::pair<std::vector<uint8_t>, std::vector<int32_t>>> whole_epoch(DataLoader& loader, int64_t epoch) {
  std::vector<std::pair<std::vector<uint8_t>, std::vector<int32_t>>> out;
  loader.start_epoch(epoch);
  Batch b;
  while (loader.next(b))
    out.emplace_back(std::vector<uint8_t>(b.images.data<uint8_t>(), b.images.data<uint8_t>() + b.images.numel()),
                     std::vector<int32_t>(b.labels.data<int32_t>(), b.labels.data<int32_t>() + b.labels.numel()));
  return out;
}

// Sample ids of one epoch, checking each batch's shape, index and pixels on the way.
std::vector<std::vector<int32_t>> epoch_batches(DataLoader& loader, const TensorDataset& ds,
                                                int64_t epoch, int64_t skip = 0) {
  loader.start_epoch(epoch, skip);
  std::vector<std::vector<int32_t>> out;
  Batch b;
  int64_t expected_index = skip;
  const int64_t row = ds.images().numel() / std::max<int64_t>(ds.size(), 1);
  while (loader.next(b)) {
    EXPECT_EQ(b.index, expected_index++);
    EXPECT_EQ(b.images.ndim(), 4);
    EXPECT_EQ(b.images.dim(0), b.labels.dim(0));
    EXPECT_EQ(b.images.dim(1), ds.images().dim(1));
    EXPECT_EQ(b.images.dtype(), DType::u8);
    EXPECT_EQ(b.labels.dtype(), DType::i32);
    std::vector<int32_t> ids(b.labels.data<int32_t>(), b.labels.data<int32_t>() + b.labels.dim(0));
    for (size_t r = 0; r < ids.size(); ++r)
      for (int64_t k = 0; k < row; ++k)
        EXPECT_EQ(b.images.data<uint8_t>()[static_cast<int64_t>(r) * row + k],
                  static_cast<uint8_t>(ids[r] + k));
    out.push_back(std::move(ids));
  }
  EXPECT_FALSE(loader.next(b));  // stays done
  return out;
}

std::vector<int32_t> flatten(const std::vector<std::vector<int32_t>>& batches) {
  std::vector<int32_t> all;
  for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  return all;
}

}  // namespace

TEST(Loader, EverySampleExactlyOncePerEpoch) {
  const auto ds_owner = numbered_dataset(103);
  const TensorDataset& ds = *ds_owner;
  DataLoader loader(ds, options(ds, 10, /*shuffle=*/true, /*drop_last=*/false, /*seed=*/7, /*workers=*/4));
  EXPECT_EQ(loader.batches_per_epoch(), 11);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const auto batches = epoch_batches(loader, ds, epoch);
    ASSERT_EQ(batches.size(), 11u);
    EXPECT_EQ(batches.back().size(), 3u);
    auto all = flatten(batches);
    std::sort(all.begin(), all.end());
    std::vector<int32_t> expected(103);
    for (int i = 0; i < 103; ++i) expected[i] = i;
    EXPECT_EQ(all, expected);
  }
}

TEST(Loader, OrderIsAPureFunctionOfSeedAndEpoch) {
  const auto ds_owner = numbered_dataset(200);
  const TensorDataset& ds = *ds_owner;
  DataLoader a(ds, options(ds, 16, true, false, 42)), b(ds, options(ds, 16, true, false, 42)), c(ds, options(ds, 16, true, false, 43));
  const auto a1 = flatten(epoch_batches(a, ds, 1));
  const auto a2 = flatten(epoch_batches(a, ds, 2));
  // Another loader, epochs visited in another order: the same batches.
  const auto b2 = flatten(epoch_batches(b, ds, 2));
  const auto b1 = flatten(epoch_batches(b, ds, 1));
  EXPECT_EQ(a1, b1);
  EXPECT_EQ(a2, b2);
  EXPECT_NE(a1, a2);  // a new order every epoch
  EXPECT_NE(a1, flatten(epoch_batches(c, ds, 1)));  // and per seed
  std::vector<int32_t> identity(200);
  for (int i = 0; i < 200; ++i) identity[i] = i;
  EXPECT_NE(a1, identity);
  EXPECT_EQ(std::vector<int64_t>(a1.begin(), a1.end()), a.epoch_order(1));
}

TEST(Loader, NoShuffleIsSequential) {
  const auto ds_owner = numbered_dataset(25);
  const TensorDataset& ds = *ds_owner;
  DataLoader loader(ds, options(ds, 4, /*shuffle=*/false, false, 1));
  std::vector<int32_t> identity(25);
  for (int i = 0; i < 25; ++i) identity[i] = i;
  EXPECT_EQ(flatten(epoch_batches(loader, ds, 0)), identity);
  EXPECT_EQ(flatten(epoch_batches(loader, ds, 5)), identity);
}

TEST(Loader, SkipBatchesMatchesTheUninterruptedEpoch) {
  const auto ds_owner = numbered_dataset(97);
  const TensorDataset& ds = *ds_owner;
  DataLoader full(ds, options(ds, 8, true, false, 3));
  const auto reference = epoch_batches(full, ds, 4);
  ASSERT_EQ(reference.size(), 13u);
  for (int64_t skip : {0, 1, 5, 12, 13}) {
    DataLoader resumed(ds, options(ds, 8, true, false, 3, /*workers=*/3));
    const auto tail = epoch_batches(resumed, ds, 4, skip);
    EXPECT_EQ(tail, std::vector<std::vector<int32_t>>(reference.begin() + skip, reference.end()))
        << "skip " << skip;
  }
  EXPECT_THROW(full.start_epoch(4, 14), InputError);
  EXPECT_THROW(full.start_epoch(4, -1), InputError);
}

TEST(Loader, DropLast) {
  const auto ds_owner = numbered_dataset(103);
  const TensorDataset& ds = *ds_owner;
  DataLoader loader(ds, options(ds, 10, true, /*drop_last=*/true, 9));
  EXPECT_EQ(loader.batches_per_epoch(), 10);
  const auto batches = epoch_batches(loader, ds, 0);
  ASSERT_EQ(batches.size(), 10u);
  for (const auto& b : batches) EXPECT_EQ(b.size(), 10u);
  auto all = flatten(batches);
  EXPECT_EQ(std::set<int32_t>(all.begin(), all.end()).size(), 100u);
}

TEST(Loader, EmptyAndTinyDatasets) {
  const auto empty_owner = numbered_dataset(0);
  const TensorDataset& empty = *empty_owner;
  DataLoader loader(empty, options(empty, 4, true, false, 1));
  EXPECT_EQ(loader.batches_per_epoch(), 0);
  EXPECT_TRUE(epoch_batches(loader, empty, 0).empty());
  const auto three_owner = numbered_dataset(3);
  const TensorDataset& three = *three_owner;
  DataLoader dropped(three, options(three, 4, true, /*drop_last=*/true, 1));
  EXPECT_EQ(dropped.batches_per_epoch(), 0);
  EXPECT_TRUE(epoch_batches(dropped, three, 0).empty());
  DataLoader kept(three, options(three, 4, true, false, 1));
  EXPECT_EQ(epoch_batches(kept, three, 0).size(), 1u);
  EXPECT_THROW(DataLoader(three, options(three, 0, true, false, 1)), InputError);
}

TEST(Loader, DestroyAndRestartMidEpoch) {
  const auto ds_owner = numbered_dataset(1000, 3, 8, 8);
  const TensorDataset& ds = *ds_owner;
  for (int i = 0; i < 50; ++i) {
    DataLoader loader(ds, options(ds, 7, true, false, static_cast<uint64_t>(i), 1 + i % 4));
    loader.start_epoch(0);
    Batch b;
    for (int k = 0; k < i % 5; ++k) ASSERT_TRUE(loader.next(b));
    if (i % 3 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // let the queue fill
  }  // destroyed with the worker blocked on a full queue or mid-batch
  DataLoader loader(ds, options(ds, 7, true, false, 5));
  const auto reference = epoch_batches(loader, ds, 2);
  for (int i = 0; i < 20; ++i) {
    loader.start_epoch(1);
    Batch b;
    for (int k = 0; k < i % 4; ++k) ASSERT_TRUE(loader.next(b));
  }
  EXPECT_EQ(epoch_batches(loader, ds, 2), reference);  // a restart starts clean
}

TEST(Loader, BatchesStayValidAfterTheLoaderMovesOn) {
  const auto ds_owner = numbered_dataset(64);
  const TensorDataset& ds = *ds_owner;
  DataLoader loader(ds, options(ds, 8, true, false, 11));
  loader.start_epoch(0);
  std::vector<Batch> kept;
  Batch b;
  while (loader.next(b)) kept.push_back(b);
  loader.start_epoch(1);  // the loader reuses nothing that a caller still holds
  ASSERT_TRUE(loader.next(b));
  std::vector<int32_t> ids;
  for (const Batch& k : kept) ids.insert(ids.end(), k.labels.data<int32_t>(), k.labels.data<int32_t>() + 8);
  std::sort(ids.begin(), ids.end());
  for (int i = 0; i < 64; ++i) EXPECT_EQ(ids[i], i);
}

TEST(Loader, WorkersChangeNothingButTheSpeed) {
  const SeededDataset ds(150);
  LoaderOptions o = options(ds, 16, true, false, 21);
  o.preprocess = {1, 2, 3};
  DataLoader one(ds, o);
  const auto reference = whole_epoch(one, 3);
  ASSERT_EQ(reference.size(), 10u);
  for (int64_t workers : {2, 5, 16}) {
    o.workers = workers;
    DataLoader many(ds, o);
    EXPECT_EQ(whole_epoch(many, 3), reference) << workers << " workers";
  }
  // Another epoch: new order and new per-sample randomness.
  DataLoader again(ds, options(ds, 16, true, false, 21));
  EXPECT_NE(whole_epoch(again, 4), reference);
}

TEST(Loader, ABadSampleStopsTheEpochWithItsName) {
  const SeededDataset ds(40, {17});
  LoaderOptions o = options(ds, 8, false, false, 1, 3);
  DataLoader loader(ds, o);
  loader.start_epoch(0);
  Batch b;
  std::string message;
  try {
    while (loader.next(b)) {
    }
  } catch (const BadSampleError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("sample17.jpg: not a JPEG or PNG image"), std::string::npos) << message;
  // The loader is usable again afterwards.
  const SeededDataset good(40);
  DataLoader fresh(good, o);
  EXPECT_EQ(whole_epoch(fresh, 0).size(), 5u);
}

TEST(Loader, SkippedBadSamplesShrinkTheirBatchAndAreCounted) {
  const SeededDataset ds(40, {0, 9, 10, 39});
  LoaderOptions o = options(ds, 8, false, false, 1, 4);
  o.preprocess = {1, 2, 3};
  o.skip_bad_samples = true;
  DataLoader loader(ds, o);
  const auto batches = whole_epoch(loader, 0);
  ASSERT_EQ(batches.size(), 5u);
  std::vector<size_t> sizes;
  std::vector<int32_t> ids;
  for (const auto& [pixels, labels] : batches) {
    sizes.push_back(labels.size());
    EXPECT_EQ(pixels.size(), labels.size() * 6);
    ids.insert(ids.end(), labels.begin(), labels.end());
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{7, 6, 8, 8, 7}));
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 9), 0);
  EXPECT_EQ(ids.size(), 36u);
  EXPECT_EQ(loader.stats().skipped, 4);
  EXPECT_EQ(loader.stats().samples, 36);
}

TEST(Loader, PrefetchIsBounded) {
  const SeededDataset ds(400);
  LoaderOptions o = options(ds, 4, true, false, 1, 3);
  o.prefetch = 5;
  DataLoader loader(ds, o);
  loader.start_epoch(0);
  Batch b;
  ASSERT_TRUE(loader.next(b));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // far longer than 6 batches take
  // Served one, then at most `prefetch` batches ahead of the consumer: memory stays bounded.
  EXPECT_LE(ds.loads_.load(), (1 + 5) * 4);
  EXPECT_GE(ds.loads_.load(), (1 + 5) * 4 - 3 * 4);  // and the workers did fill it
}

TEST(Loader, BatchesComeFromTheGivenHostAllocator) {
  const auto ds_owner = numbered_dataset(30);
  LoaderOptions o = options(*ds_owner, 8, true, false, 2, 2);
  std::atomic<int> calls{0};
  o.host_empty = [&](Shape shape, DType dtype) {
    ++calls;
    return Tensor::empty(std::move(shape), dtype);
  };
  DataLoader loader(*ds_owner, o);
  EXPECT_EQ(epoch_batches(loader, *ds_owner, 0).size(), 4u);
  EXPECT_EQ(calls.load(), 4);
}

// With the run's epoch count the workers begin the next epoch while the current one ends; what
// they serve is what a loader that starts each epoch afresh serves, whatever the workers.
TEST(Loader, TheNextEpochBegunAheadIsTheEpochItself) {
  const SeededDataset ds(150);
  LoaderOptions o = options(ds, 16, true, true, 21, 3);
  o.preprocess = {1, 2, 3};
  DataLoader fresh(ds, o);
  std::vector<decltype(whole_epoch(fresh, 0))> reference;
  for (int64_t e = 0; e < 3; ++e) reference.push_back(whole_epoch(fresh, e));
  for (int64_t workers : {1, 3, 8}) {
    o.workers = workers;
    o.epochs = 3;
    DataLoader ahead(ds, o);
    for (int64_t e = 0; e < 3; ++e) EXPECT_EQ(whole_epoch(ahead, e), reference[e]) << workers << " workers, epoch " << e;
  }
}

TEST(Loader, WhileAnEpochEndsTheNextOneIsLoadedWithinThePrefetchBound) {
  const SeededDataset ds(64);
  LoaderOptions o = options(ds, 4, true, true, 5, 2);
  o.preprocess = {1, 2, 3};
  o.prefetch = 6;
  o.epochs = 2;
  DataLoader loader(ds, o);
  loader.start_epoch(0);
  Batch b;
  while (loader.next(b)) {
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // far longer than 6 batches take
  // Epoch 0's 64 samples, then up to `prefetch` batches of epoch 1 (evaluation would run now).
  EXPECT_EQ(ds.loads_.load(), 64 + 6 * 4);
  EXPECT_EQ(loader.stats().samples, 64) << "the epoch's figures are its own";
  loader.start_epoch(1);
  int64_t served = 0;
  while (loader.next(b)) ++served;
  EXPECT_EQ(served, 16);
  EXPECT_EQ(loader.stats().samples, 64);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(ds.loads_.load(), 128) << "nothing is loaded past the run's last epoch";
}

TEST(Loader, ABadSampleMetAheadSurfacesInItsOwnEpoch) {
  // 34 samples in batches of 4 (drop_last): each epoch leaves 2 out. The bad one is left out of
  // epoch 0 and read early in epoch 1, while the workers run ahead of epoch 0's end.
  const SeededDataset probe(34);
  LoaderOptions o = options(probe, 4, true, true, 3, 2);
  o.preprocess = {1, 2, 3};
  o.epochs = 2;
  o.prefetch = 8;
  const DataLoader orders(probe, o);
  const std::vector<int64_t> first = orders.epoch_order(0), second = orders.epoch_order(1);
  const int64_t bad = first[32];
  const auto at = std::find(second.begin(), second.end(), bad) - second.begin();
  ASSERT_LT(at, 32) << "seed 3 was picked for an order that reads it in epoch 1";
  const SeededDataset ds(34, {bad});
  DataLoader loader(ds, o);
  loader.start_epoch(0);
  Batch b;
  int64_t served = 0;
  while (loader.next(b)) ++served;
  EXPECT_EQ(served, 8) << "epoch 0 is served whole";
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  loader.start_epoch(1);
  std::string message;
  served = 0;
  try {
    while (loader.next(b)) ++served;
  } catch (const BadSampleError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("sample" + std::to_string(bad) + ".jpg"), std::string::npos) << message;
  EXPECT_LE(served, at / 4);
}
