// The in-memory dataset readers: CIFAR binaries written byte by byte by the tests, and
// synthetic data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "engine/core/error.h"
#include "tests/input_error.h"
#include "tests/temp_dir.h"

namespace fs = std::filesystem;
using namespace convoy;
using convoy::testing::input_error_of;

using convoy::testing::TempDir;
using convoy::testing::write_file;
using convoy::testing::write_text_file;

namespace {

// ---- CIFAR -----------------------------------------------------------------------------------

constexpr int kCifarPixels = 3 * 32 * 32;

// Pixel p of record r, distinct enough that a shifted or swapped plane shows.
uint8_t cifar_pixel(int record, int p) { return static_cast<uint8_t>(record * 37 + p * 7 + p / 1024); }

// Records numbered from `first_record` (their pixels come from cifar_pixel), byte by byte; each
// record's label bytes are {label} for cifar10, {coarse, fine} for cifar100.
std::vector<uint8_t> cifar_bytes(const std::vector<std::vector<uint8_t>>& labels, int first_record) {
  std::vector<uint8_t> out;
  for (size_t r = 0; r < labels.size(); ++r) {
    out.insert(out.end(), labels[r].begin(), labels[r].end());
    for (int p = 0; p < kCifarPixels; ++p) out.push_back(cifar_pixel(first_record + static_cast<int>(r), p));
  }
  return out;
}

// CIFAR-10 in `dir`: data_batch_i.bin holds two records (labels 2i-2 and 2i-1 mod 10), the
// test batch three (labels 7, 8, 9); record numbers run on across the train batches.
void write_cifar10(const fs::path& dir) {
  for (int i = 1; i <= 5; ++i) {
    const int first = (i - 1) * 2;
    write_file(
        dir / ("data_batch_" + std::to_string(i) + ".bin"),
        cifar_bytes({{static_cast<uint8_t>(first % 10)}, {static_cast<uint8_t>((first + 1) % 10)}}, first));
  }
  write_file(dir / "test_batch.bin", cifar_bytes({{7}, {8}, {9}}, 100));
}

std::vector<uint8_t> image_bytes(const TensorDataset& d, int64_t i) {
  const uint8_t* p = d.images().data<uint8_t>() + i * kCifarPixels;
  return {p, p + kCifarPixels};
}

std::vector<uint8_t> expected_pixels(int record) {
  std::vector<uint8_t> out(kCifarPixels);
  for (int p = 0; p < kCifarPixels; ++p) out[static_cast<size_t>(p)] = cifar_pixel(record, p);
  return out;
}

TEST(Cifar, Cifar10TrainRoundTrip) {
  TempDir dir;
  write_cifar10(dir.path());
  auto d = load_cifar("cifar10", dir.path(), "train");
  EXPECT_EQ(d->name(), "cifar10:train");
  ASSERT_EQ(d->size(), 10);
  EXPECT_EQ(d->images().shape(), (Shape{10, 3, 32, 32}));
  EXPECT_EQ(d->labels().dtype(), DType::i32);
  EXPECT_EQ(d->stored_shape(), (Shape{3, 32, 32}));
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(d->label(i), i) << i;
    EXPECT_EQ(image_bytes(*d, i), expected_pixels(i)) << i;
  }
  // The standard names when there is no batches.meta.txt.
  ASSERT_EQ(d->class_names().size(), 10u);
  EXPECT_EQ(d->class_names()[0], "airplane");
  EXPECT_EQ(d->class_names()[9], "truck");
}

TEST(Cifar, Cifar10TestSplitValAliasAndMetaNames) {
  TempDir dir;
  const fs::path sub = dir / "cifar-10-batches-bin";
  write_cifar10(sub);
  std::string meta;
  for (int i = 0; i < 10; ++i) meta += "class" + std::to_string(i) + "\r\n";
  write_text_file(sub / "batches.meta.txt", meta + "\n\n");  // the official file ends with blank lines
  for (const char* split : {"test", "val"}) {
    auto d = load_cifar("cifar10", dir.path(), split);  // the parent directory form
    EXPECT_EQ(d->name(), std::string("cifar10:") + split);
    ASSERT_EQ(d->size(), 3);
    EXPECT_EQ(d->label(0), 7);
    EXPECT_EQ(d->label(2), 9);
    EXPECT_EQ(image_bytes(*d, 2), expected_pixels(102));
    EXPECT_EQ(d->class_names()[3], "class3");
  }
}

TEST(Cifar, LimitStopsAcrossBatches) {
  TempDir dir;
  write_cifar10(dir.path());
  auto d = load_cifar("cifar10", dir.path(), "train", 5);
  ASSERT_EQ(d->size(), 5);
  EXPECT_EQ(d->label(4), 4);
  EXPECT_EQ(image_bytes(*d, 4), expected_pixels(4));  // the first record of data_batch_3.bin
  EXPECT_EQ(load_cifar("cifar10", dir.path(), "train", 1000)->size(), 10);
}

TEST(Cifar, Cifar100FineLabelsAndNames) {
  TempDir dir;
  const fs::path sub = dir / "cifar-100-binary";
  write_file(sub / "train.bin", cifar_bytes({{19, 99}, {3, 0}, {0, 42}}, 0));
  write_file(sub / "test.bin", cifar_bytes({{1, 5}}, 50));
  auto train = load_cifar("cifar100", sub, "train");
  ASSERT_EQ(train->size(), 3);
  EXPECT_EQ(train->label(0), 99);
  EXPECT_EQ(train->label(1), 0);
  EXPECT_EQ(train->label(2), 42);
  EXPECT_EQ(image_bytes(*train, 1), expected_pixels(1));
  ASSERT_EQ(train->class_names().size(), 100u);
  EXPECT_EQ(train->class_names()[42], "42");

  std::string names;
  for (int i = 0; i < 100; ++i) names += "fine" + std::to_string(i) + "\n";
  write_text_file(sub / "fine_label_names.txt", names);
  auto test = load_cifar("cifar100", dir.path(), "test");
  ASSERT_EQ(test->size(), 1);
  EXPECT_EQ(test->label(0), 5);
  EXPECT_EQ(image_bytes(*test, 0), expected_pixels(50));
  EXPECT_EQ(test->class_names()[5], "fine5");
}

TEST(Cifar, TruncatedFile) {
  TempDir dir;
  write_cifar10(dir.path());
  auto bytes = cifar_bytes({{1}}, 0);
  bytes.pop_back();
  write_file(dir / "data_batch_4.bin", bytes);
  const std::string m = input_error_of([&] { load_cifar("cifar10", dir.path(), "train"); }, "truncated");
  EXPECT_MESSAGE(m, dir / "data_batch_4.bin",
                 "truncated: 3072 bytes is not a whole number of 3073-byte records");
  // CIFAR-100's records are one byte longer.
  write_file(dir / "test.bin", cifar_bytes({{1}}, 0));
  EXPECT_MESSAGE(input_error_of([&] { load_cifar("cifar100", dir.path(), "test"); }, "cifar100 truncated"),
                 dir / "test.bin", "3074-byte records");
}

TEST(Cifar, MissingFileListsExpected) {
  TempDir dir;
  write_cifar10(dir.path());
  fs::remove(dir / "data_batch_2.bin");
  const std::string m = input_error_of([&] { load_cifar("cifar10", dir.path(), "train"); }, "missing");
  EXPECT_MESSAGE(m, dir / "data_batch_2.bin", "no such file");
  EXPECT_NE(m.find("data_batch_5.bin"), std::string::npos) << m;  // the list of expected files
  EXPECT_NE(m.find("missing: data_batch_2.bin"), std::string::npos) << m;
  const std::string none =
      input_error_of([&] { load_cifar("cifar100", dir.path(), "train"); }, "no cifar100");
  EXPECT_MESSAGE(none, dir / "train.bin", "no such file");
}

TEST(Cifar, BadLabelNamesRecord) {
  TempDir dir;
  write_cifar10(dir.path());
  write_file(dir / "test_batch.bin", cifar_bytes({{1}, {2}, {10}}, 0));
  const std::string m = input_error_of([&] { load_cifar("cifar10", dir.path(), "test"); }, "bad label");
  EXPECT_MESSAGE(m, dir / "test_batch.bin", "label 10 of record 2 is out of range (expected 0 to 9)");
  // Within the limit, the bad record is never read.
  EXPECT_EQ(load_cifar("cifar10", dir.path(), "test", 2)->size(), 2);
  write_file(dir / "train.bin", cifar_bytes({{0, 100}}, 0));
  EXPECT_MESSAGE(input_error_of([&] { load_cifar("cifar100", dir.path(), "train"); }, "cifar100 label"),
                 dir / "train.bin", "label 100 of record 0");
}

TEST(Cifar, EmptySplitBadSplitBadMeta) {
  TempDir dir;
  write_cifar10(dir.path());
  write_file(dir / "test_batch.bin", {});
  EXPECT_MESSAGE(input_error_of([&] { load_cifar("cifar10", dir.path(), "test"); }, "empty"),
                 dir / "test_batch.bin", "no records");
  EXPECT_NE(input_error_of([&] { load_cifar("cifar10", dir.path(), "valid"); }, "split").find("'valid'"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { load_cifar("cifar42", dir.path(), "train"); }, "kind").find("cifar42"),
            std::string::npos);
  write_text_file(dir / "batches.meta.txt", "a\nb\n");
  EXPECT_MESSAGE(input_error_of([&] { load_cifar("cifar10", dir.path(), "train"); }, "meta"),
                 dir / "batches.meta.txt", "has 2 class names, expected 10");
}

// ---- synthetic -------------------------------------------------------------------------------

std::vector<uint8_t> load_sample(const Dataset& d, int64_t i, const Shape& s) {
  Preprocess p;
  p.channels = s[0];
  p.height = s[1];
  p.width = s[2];
  std::vector<uint8_t> out(static_cast<size_t>(s[0] * s[1] * s[2]), 0);
  d.load(i, p, SampleMode::eval, 0, out.data());
  return out;
}

TEST(Synthetic, DeterministicPerSeed) {
  const Shape shape = {3, 5, 7};
  auto a = make_synthetic(shape, 10, 100, 1);
  auto b = make_synthetic(shape, 10, 100, 1);
  auto c = make_synthetic(shape, 10, 100, 2);
  EXPECT_EQ(a->name(), "synthetic");
  EXPECT_EQ(a->size(), 100);
  EXPECT_EQ(a->stored_shape(), shape);
  ASSERT_EQ(a->class_names().size(), 10u);
  EXPECT_EQ(a->class_names()[7], "7");
  int label_diffs = 0, pixel_diffs = 0;
  std::set<int32_t> seen;
  for (int64_t i = 0; i < 100; ++i) {
    EXPECT_EQ(a->label(i), b->label(i));
    EXPECT_EQ(load_sample(*a, i, shape), load_sample(*b, i, shape));
    label_diffs += a->label(i) != c->label(i);
    pixel_diffs += load_sample(*a, i, shape) != load_sample(*c, i, shape);
    EXPECT_GE(a->label(i), 0);
    EXPECT_LT(a->label(i), 10);
    seen.insert(a->label(i));
  }
  EXPECT_GT(label_diffs, 50);
  EXPECT_EQ(pixel_diffs, 100);
  EXPECT_EQ(seen.size(), 10u);  // 100 draws of 10 classes: every one turns up
  // Samples differ from each other, and their bytes look random (not all one value).
  const auto s0 = load_sample(*a, 0, shape), s1 = load_sample(*a, 1, shape);
  EXPECT_NE(s0, s1);
  EXPECT_GT(std::set<uint8_t>(s0.begin(), s0.end()).size(), 40u);
  // A larger dataset from the same seed starts with the same samples.
  auto big = make_synthetic(shape, 10, 1000, 1);
  EXPECT_EQ(load_sample(*big, 3, shape), load_sample(*a, 3, shape));
  EXPECT_EQ(big->label(99), a->label(99));
}

// Synthetic images come at the model's input size: a training load with a random-resized crop
// gives the bytes of a plain load (no resampling of noise: benchmarks measure the engine).
TEST(Synthetic, NoCropsOrResizing) {
  auto d = make_synthetic({3, 64, 48}, 10, 10, 5);
  Preprocess p;
  p.channels = 3;
  p.height = p.width = 32;
  p.random_resized_crop = true;
  std::vector<uint8_t> train(3 * 32 * 32, 0), eval(3 * 32 * 32, 1);
  d->load(4, p, SampleMode::train, 77, train.data());
  p.random_resized_crop = false;
  d->load(4, p, SampleMode::eval, 0, eval.data());
  EXPECT_EQ(train, eval);
  EXPECT_GT(std::set<uint8_t>(train.begin(), train.end()).size(), 40u);
}

TEST(Synthetic, GrayAndOddSizes) {
  auto d = make_synthetic({1, 3, 3}, 1, 4, 9);  // 9 pixels: not a multiple of the 8 bytes a hash gives
  EXPECT_EQ(d->label(3), 0);
  const auto s = load_sample(*d, 2, {1, 3, 3});
  EXPECT_EQ(s.size(), 9u);
  EXPECT_NE(s, load_sample(*d, 3, {1, 3, 3}));
}

TEST(Synthetic, BadArguments) {
  auto bad = [](Shape shape, int64_t classes, int64_t size, const std::string& fragment) {
    const std::string m = input_error_of([&] { make_synthetic(shape, classes, size, 0); }, fragment);
    EXPECT_NE(m.find(fragment), std::string::npos) << m;
  };
  bad({3, 32}, 10, 10, "(C, H, W)");
  bad({2, 32, 32}, 10, 10, "channels must be 1 or 3");
  bad({3, 0, 32}, 10, 10, "height and width must be positive");
  bad({3, 32, -1}, 10, 10, "height and width must be positive");
  bad({3, 32, 32}, 0, 10, "classes must be positive");
  bad({3, 32, 32}, 10, 0, "size must be positive");
  bad({3, 32, 32}, 10, -5, "size must be positive");
}

}  // namespace
