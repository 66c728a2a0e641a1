// DataLoader: coverage, reproducible order, resume mid-epoch, shutdown.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "datasets/loader.h"
#include "engine/core/error.h"

using namespace convoy;

namespace {

// Sample i has label i and pixels (i + k) mod 256, so a batch row can be traced back.
Dataset numbered_dataset(int64_t n, int64_t c = 1, int64_t h = 2, int64_t w = 3) {
  Dataset ds;
  ds.name = "numbered";
  ds.images = Tensor::empty({n, c, h, w}, DType::u8);
  ds.labels = Tensor::empty({n}, DType::i32);
  const int64_t row = c * h * w;
  for (int64_t i = 0; i < n; ++i) {
    ds.labels.data<int32_t>()[i] = static_cast<int32_t>(i);
    for (int64_t k = 0; k < row; ++k) ds.images.data<uint8_t>()[i * row + k] = static_cast<uint8_t>(i + k);
  }
  return ds;
}

// Sample ids of one epoch, checking each batch's shape, index and pixels on the way.
std::vector<std::vector<int32_t>> epoch_batches(DataLoader& loader, const Dataset& ds,
                                                int64_t epoch, int64_t skip = 0) {
  loader.start_epoch(epoch, skip);
  std::vector<std::vector<int32_t>> out;
  Batch b;
  int64_t expected_index = skip;
  const int64_t row = ds.images.numel() / std::max<int64_t>(ds.size(), 1);
  while (loader.next(b)) {
    EXPECT_EQ(b.index, expected_index++);
    EXPECT_EQ(b.images.ndim(), 4);
    EXPECT_EQ(b.images.dim(0), b.labels.dim(0));
    EXPECT_EQ(b.images.dim(1), ds.images.dim(1));
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
  const Dataset ds = numbered_dataset(103);
  DataLoader loader(ds, 10, /*shuffle=*/true, /*drop_last=*/false, /*seed=*/7);
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
  const Dataset ds = numbered_dataset(200);
  DataLoader a(ds, 16, true, false, 42), b(ds, 16, true, false, 42), c(ds, 16, true, false, 43);
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
  const Dataset ds = numbered_dataset(25);
  DataLoader loader(ds, 4, /*shuffle=*/false, false, 1);
  std::vector<int32_t> identity(25);
  for (int i = 0; i < 25; ++i) identity[i] = i;
  EXPECT_EQ(flatten(epoch_batches(loader, ds, 0)), identity);
  EXPECT_EQ(flatten(epoch_batches(loader, ds, 5)), identity);
}

TEST(Loader, SkipBatchesMatchesTheUninterruptedEpoch) {
  const Dataset ds = numbered_dataset(97);
  DataLoader full(ds, 8, true, false, 3);
  const auto reference = epoch_batches(full, ds, 4);
  ASSERT_EQ(reference.size(), 13u);
  for (int64_t skip : {0, 1, 5, 12, 13}) {
    DataLoader resumed(ds, 8, true, false, 3);
    const auto tail = epoch_batches(resumed, ds, 4, skip);
    EXPECT_EQ(tail, std::vector<std::vector<int32_t>>(reference.begin() + skip, reference.end()))
        << "skip " << skip;
  }
  EXPECT_THROW(full.start_epoch(4, 14), InputError);
  EXPECT_THROW(full.start_epoch(4, -1), InputError);
}

TEST(Loader, DropLast) {
  const Dataset ds = numbered_dataset(103);
  DataLoader loader(ds, 10, true, /*drop_last=*/true, 9);
  EXPECT_EQ(loader.batches_per_epoch(), 10);
  const auto batches = epoch_batches(loader, ds, 0);
  ASSERT_EQ(batches.size(), 10u);
  for (const auto& b : batches) EXPECT_EQ(b.size(), 10u);
  auto all = flatten(batches);
  EXPECT_EQ(std::set<int32_t>(all.begin(), all.end()).size(), 100u);
}

TEST(Loader, EmptyAndTinyDatasets) {
  const Dataset empty = numbered_dataset(0);
  DataLoader loader(empty, 4, true, false, 1);
  EXPECT_EQ(loader.batches_per_epoch(), 0);
  EXPECT_TRUE(epoch_batches(loader, empty, 0).empty());
  const Dataset three = numbered_dataset(3);
  DataLoader dropped(three, 4, true, /*drop_last=*/true, 1);
  EXPECT_EQ(dropped.batches_per_epoch(), 0);
  EXPECT_TRUE(epoch_batches(dropped, three, 0).empty());
  DataLoader kept(three, 4, true, false, 1);
  EXPECT_EQ(epoch_batches(kept, three, 0).size(), 1u);
  EXPECT_THROW(DataLoader(three, 0, true, false, 1), InputError);
}

TEST(Loader, DestroyAndRestartMidEpoch) {
  const Dataset ds = numbered_dataset(1000, 3, 8, 8);
  for (int i = 0; i < 50; ++i) {
    DataLoader loader(ds, 7, true, false, static_cast<uint64_t>(i));
    loader.start_epoch(0);
    Batch b;
    for (int k = 0; k < i % 5; ++k) ASSERT_TRUE(loader.next(b));
    if (i % 3 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // let the queue fill
  }  // destroyed with the worker blocked on a full queue or mid-batch
  DataLoader loader(ds, 7, true, false, 5);
  const auto reference = epoch_batches(loader, ds, 2);
  for (int i = 0; i < 20; ++i) {
    loader.start_epoch(1);
    Batch b;
    for (int k = 0; k < i % 4; ++k) ASSERT_TRUE(loader.next(b));
  }
  EXPECT_EQ(epoch_batches(loader, ds, 2), reference);  // a restart starts clean
}

TEST(Loader, BatchesStayValidAfterTheLoaderMovesOn) {
  const Dataset ds = numbered_dataset(64);
  DataLoader loader(ds, 8, true, false, 11);
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
