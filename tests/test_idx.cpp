// IDX reader and the MNIST-format dataset loaders.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>


#include "temp_dir.h"
#include "input_error.h"
#include "datasets/dataset.h"
#include "datasets/idx.h"
#include "engine/core/error.h"

namespace fs = std::filesystem;
using namespace convoy;

using convoy::testing::write_file;

namespace {

struct TempDir : convoy::testing::TempDir {
  TempDir() : convoy::testing::TempDir("convoy-idx") {}
};

std::vector<uint8_t> idx_bytes(uint8_t type, const std::vector<uint32_t>& dims,
                               const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(d >> s));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

void write_gzip(const fs::path& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
  }
  ASSERT_EQ(gzclose(f), Z_OK);
}

std::vector<uint8_t> read_all(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

// The InputError message of read_idx(path); fails the test when nothing is thrown.
std::string idx_error(const fs::path& path) {
  return convoy::testing::input_error_of([&] { read_idx(path); }, "read_idx(" + path.string() + ")");
}

}  // namespace

TEST(Idx, RawRoundTrip) {
  TempDir dir;
  const auto data = random_bytes(3 * 4 * 5, 1);
  write_file(dir / "a-idx3-ubyte", idx_bytes(0x08, {3, 4, 5}, data));
  const IdxArray a = read_idx(dir / "a-idx3-ubyte");
  EXPECT_EQ(a.data.shape(), (Shape{3, 4, 5}));
  EXPECT_EQ(a.data.dtype(), DType::u8);
  EXPECT_TRUE(a.data.device().is_cpu());
  EXPECT_EQ(std::vector<uint8_t>(a.data.data<uint8_t>(), a.data.data<uint8_t>() + data.size()), data);
}

TEST(Idx, GzipRoundTripDetectedByMagic) {
  TempDir dir;
  const auto data = random_bytes(7 * 9, 2);
  write_gzip(dir / "b.gz", idx_bytes(0x08, {7, 9}, data));
  // Detection is by content, not by name.
  fs::copy_file(dir / "b.gz", dir / "b-no-suffix");
  for (const char* name : {"b.gz", "b-no-suffix"}) {
    const IdxArray a = read_idx(dir / name);
    EXPECT_EQ(a.data.shape(), (Shape{7, 9}));
    EXPECT_EQ(std::vector<uint8_t>(a.data.data<uint8_t>(), a.data.data<uint8_t>() + data.size()), data);
  }
}

TEST(Idx, GzipLargerThanOneChunk) {
  TempDir dir;
  // Several MiB, so the buffer grows and the input is refilled many times.
  const auto data = random_bytes(3u << 20, 3);
  write_gzip(dir / "big.gz", idx_bytes(0x08, {3, 1024, 1024}, data));
  const IdxArray a = read_idx(dir / "big.gz");
  ASSERT_EQ(a.data.numel(), static_cast<int64_t>(data.size()));
  EXPECT_EQ(0, std::memcmp(a.data.raw(), data.data(), data.size()));
}

TEST(Idx, ConcatenatedGzipMembers) {
  TempDir dir;
  const auto bytes = idx_bytes(0x08, {2, 8}, random_bytes(16, 4));
  write_gzip(dir / "p1.gz", {bytes.begin(), bytes.begin() + 10});
  write_gzip(dir / "p2.gz", {bytes.begin() + 10, bytes.end()});
  auto joined = read_all(dir / "p1.gz");
  const auto second = read_all(dir / "p2.gz");
  joined.insert(joined.end(), second.begin(), second.end());
  write_file(dir / "joined.gz", joined);
  const IdxArray a = read_idx(dir / "joined.gz");
  EXPECT_EQ(0, std::memcmp(a.data.raw(), bytes.data() + 12, 16));
}

TEST(Idx, MissingFileNamesPathAndPackage) {
  TempDir dir;
  const auto m = idx_error(dir / "nope.gz");
  EXPECT_MESSAGE(m, dir / "nope.gz", "no such file");
  EXPECT_NE(m.find("dataset-fashion-mnist"), std::string::npos) << m;
  EXPECT_MESSAGE(idx_error(dir.path()), dir.path(), "is a directory");
}

TEST(Idx, TruncatedRaw) {
  TempDir dir;
  auto bytes = idx_bytes(0x08, {4, 4}, random_bytes(16, 5));
  bytes.pop_back();
  write_file(dir / "t", bytes);
  EXPECT_MESSAGE(idx_error(dir / "t"), dir / "t", "truncated");
  write_file(dir / "empty", {});
  EXPECT_MESSAGE(idx_error(dir / "empty"), dir / "empty", "truncated");
  write_file(dir / "half-header", {0, 0, 8, 3, 0, 0});
  EXPECT_MESSAGE(idx_error(dir / "half-header"), dir / "half-header", "truncated");
}

TEST(Idx, TruncatedGzip) {
  TempDir dir;
  write_gzip(dir / "full.gz", idx_bytes(0x08, {64, 64}, random_bytes(64 * 64, 6)));
  auto gz = read_all(dir / "full.gz");
  gz.resize(gz.size() / 2);
  write_file(dir / "cut.gz", gz);
  EXPECT_MESSAGE(idx_error(dir / "cut.gz"), dir / "cut.gz", "truncated");
  // A complete gzip stream whose payload is shorter than the header's dims.
  auto bytes = idx_bytes(0x08, {64, 64}, random_bytes(64 * 64, 6));
  bytes.resize(bytes.size() - 100);
  write_gzip(dir / "short.gz", bytes);
  EXPECT_MESSAGE(idx_error(dir / "short.gz"), dir / "short.gz", "truncated");
}

TEST(Idx, TrailingGarbage) {
  TempDir dir;
  auto bytes = idx_bytes(0x08, {4, 4}, random_bytes(16, 7));
  bytes.push_back(42);
  write_file(dir / "raw", bytes);
  EXPECT_MESSAGE(idx_error(dir / "raw"), dir / "raw", "trailing garbage");
  write_gzip(dir / "inside.gz", bytes);
  EXPECT_MESSAGE(idx_error(dir / "inside.gz"), dir / "inside.gz", "trailing garbage");
  bytes.pop_back();
  write_gzip(dir / "after.gz", bytes);
  auto gz = read_all(dir / "after.gz");
  gz.insert(gz.end(), {'j', 'u', 'n', 'k'});
  write_file(dir / "after.gz", gz);
  EXPECT_MESSAGE(idx_error(dir / "after.gz"), dir / "after.gz", "trailing garbage");
}

TEST(Idx, BadMagicAndUnsupportedType) {
  TempDir dir;
  write_file(dir / "magic", {0x12, 0x34, 0x08, 0x01, 0, 0, 0, 1, 7});
  EXPECT_MESSAGE(idx_error(dir / "magic"), dir / "magic", "not an IDX file");
  write_file(dir / "float", idx_bytes(0x0D, {1}, {0, 0, 0, 0}));
  const auto m = idx_error(dir / "float");
  EXPECT_MESSAGE(m, dir / "float", "0x0d (float32) is not supported");
  write_file(dir / "zero-dims", {0, 0, 8, 0});
  EXPECT_MESSAGE(idx_error(dir / "zero-dims"), dir / "zero-dims", "0 dimensions");
}

TEST(Idx, CorruptGzip) {
  TempDir dir;
  write_gzip(dir / "ok.gz", idx_bytes(0x08, {32, 32}, random_bytes(32 * 32, 8)));
  const auto good = read_all(dir / "ok.gz");
  // A wrong CRC in the trailer: the data inflates but does not check out.
  auto crc = good;
  crc[crc.size() - 8] ^= 0xFF;
  write_file(dir / "crc.gz", crc);
  EXPECT_MESSAGE(idx_error(dir / "crc.gz"), dir / "crc.gz", "corrupt gzip data");
  // A reserved block type right after the 10-byte gzip header.
  auto block = good;
  block[10] = 0xFF;
  write_file(dir / "block.gz", block);
  EXPECT_MESSAGE(idx_error(dir / "block.gz"), dir / "block.gz", "corrupt gzip data");
}

TEST(Idx, HugeDimsRejectedBeforeAllocating) {
  TempDir dir;
  write_file(dir / "overflow", idx_bytes(0x08, {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, {}));
  EXPECT_MESSAGE(idx_error(dir / "overflow"), dir / "overflow", "overflow");
  // 60000 * 28 * 28 bytes announced by a 116-byte file.
  write_file(dir / "big", idx_bytes(0x08, {60000, 28, 28}, random_bytes(100, 9)));
  EXPECT_MESSAGE(idx_error(dir / "big"), dir / "big", "need 47040000 bytes");
  // 2^56 bytes announced by a tiny gzip file: more than deflate could ever expand to.
  write_gzip(dir / "big.gz", idx_bytes(0x08, {0x1000000, 0x1000000, 0x100}, random_bytes(10, 10)));
  EXPECT_MESSAGE(idx_error(dir / "big.gz"), dir / "big.gz", "gzip file can hold");
}

TEST(Idx, MutatedFilesNeverCrash) {
  TempDir dir;
  write_gzip(dir / "base.gz", idx_bytes(0x08, {16, 16}, random_bytes(256, 11)));
  const auto gz = read_all(dir / "base.gz");
  const auto raw = idx_bytes(0x08, {16, 16}, random_bytes(256, 11));
  std::mt19937 rng(12);
  int rejected = 0;
  for (int i = 0; i < 400; ++i) {
    auto bytes = (i % 2) ? gz : raw;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
    if (rng() % 4 == 0) bytes.resize(rng() % bytes.size());
    write_file(dir / "m", bytes);
    try {
      const IdxArray a = read_idx(dir / "m");
      EXPECT_LE(a.data.numel(), 1 << 20);
    } catch (const InputError& e) {
      ++rejected;
      EXPECT_NE(std::string(e.what()).find((dir / "m").string()), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(rejected, 100);
}

// --- the MNIST-format loaders -------------------------------------------------------------

namespace {

// A tiny MNIST-format directory: `n` images of 3x2 and `labels`.
void write_mnist_dir(const fs::path& dir, const std::string& prefix, uint32_t n,
                     const std::vector<uint8_t>& labels, bool gzip) {
  const auto images = idx_bytes(0x08, {n, 3, 2}, random_bytes(n * 6, n));
  const auto lab = idx_bytes(0x08, {static_cast<uint32_t>(labels.size())}, labels);
  if (gzip) {
    write_gzip(dir / (prefix + "-images-idx3-ubyte.gz"), images);
    write_gzip(dir / (prefix + "-labels-idx1-ubyte.gz"), lab);
  } else {
    write_file(dir / (prefix + "-images-idx3-ubyte"), images);
    write_file(dir / (prefix + "-labels-idx1-ubyte"), lab);
  }
}

std::string load_error(std::string_view kind, const fs::path& dir, std::string_view split,
                       int64_t limit = 0) {
  try {
    load_dataset(DatasetSpec{std::string(kind), dir}, split, limit);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "load_dataset did not throw";
  return {};
}

const fs::path kFashion = kFashionMnistDefaultPath;

}  // namespace

TEST(IdxDataset, SmallDirectoryRawAndGzip) {
  TempDir dir;
  write_mnist_dir(dir.path(), "train", 5, {0, 1, 2, 9, 4}, /*gzip=*/false);
  write_mnist_dir(dir.path(), "t10k", 4, {3, 3, 7, 0}, /*gzip=*/true);
  const auto train = load_mnist(dir.path(), "train", 0);
  EXPECT_EQ(train->name(), "mnist:train");
  EXPECT_EQ(train->images().shape(), (Shape{5, 1, 3, 2}));
  EXPECT_EQ(train->labels().shape(), (Shape{5}));
  EXPECT_EQ(train->labels().dtype(), DType::i32);
  EXPECT_EQ(train->label(3), 9);
  EXPECT_EQ(train->class_names().at(9), "9");
  EXPECT_EQ(train->stored_shape(), (Shape{1, 3, 2}));
  const auto test = load_dataset(DatasetSpec{"fashion-mnist", dir.path()}, "test", 3);
  EXPECT_EQ(test->size(), 3);
  EXPECT_EQ(test->label(2), 7);
  EXPECT_EQ(test->class_names().at(9), "Ankle boot");
}

TEST(IdxDataset, Errors) {
  TempDir dir;
  write_mnist_dir(dir.path(), "train", 5, {0, 1, 2, 3}, false);
  auto m = load_error("mnist", dir.path(), "train");
  EXPECT_MESSAGE(m, dir / "train-labels-idx1-ubyte", "has 4 labels but");
  write_mnist_dir(dir.path(), "t10k", 3, {0, 10, 2}, true);
  m = load_error("fashion-mnist", dir.path(), "test");
  EXPECT_MESSAGE(m, dir / "t10k-labels-idx1-ubyte.gz", "label 10 at index 1 is out of range");

  TempDir empty;
  m = load_error("fashion-mnist", empty.path(), "train");
  EXPECT_MESSAGE(m, empty / "train-images-idx3-ubyte", "no such file");
  EXPECT_NE(m.find("dataset-fashion-mnist"), std::string::npos) << m;
  m = load_error("fashion-mnist", empty / "missing-dir", "train");
  EXPECT_MESSAGE(m, empty / "missing-dir", "no such directory");

  m = load_error("cifar-11", dir.path(), "train");
  EXPECT_NE(m.find("unknown dataset kind 'cifar-11'"), std::string::npos) << m;
  EXPECT_NE(m.find("fashion-mnist, mnist, cifar10"), std::string::npos) << m;
  EXPECT_NE(load_error("mnist", dir.path(), "validation").find("unknown split"), std::string::npos);
  EXPECT_NE(load_error("mnist", dir.path(), "train", -1).find("limit"), std::string::npos);
}

TEST(IdxDataset, FashionMnistTestSplit) {
  if (!fs::exists(kFashion)) GTEST_SKIP() << kFashion << " is missing (Debian's dataset-fashion-mnist)";
  const auto loaded = load_fashion_mnist(kFashion, "test");
  const TensorDataset& ds = *loaded;
  ASSERT_EQ(ds.images().shape(), (Shape{10000, 1, 28, 28}));
  ASSERT_EQ(ds.labels().shape(), (Shape{10000}));
  ASSERT_EQ(ds.class_names().size(), 10u);
  EXPECT_EQ(ds.class_names()[0], "T-shirt/top");
  EXPECT_EQ(ds.class_names()[9], "Ankle boot");
  std::vector<int> histogram(10, 0);
  for (int64_t i = 0; i < ds.size(); ++i) ++histogram.at(static_cast<size_t>(ds.label(i)));
  EXPECT_EQ(histogram, std::vector<int>(10, 1000));
  // Real pictures: neither blank nor saturated.
  double mean = 0;
  for (int64_t i = 0; i < ds.images().numel(); ++i) mean += ds.images().data<uint8_t>()[i];
  mean /= static_cast<double>(ds.images().numel());
  EXPECT_GT(mean, 40.0);
  EXPECT_LT(mean, 120.0);

  const auto first = load_dataset(DatasetSpec{}, "test", 100);  // the default kind and path
  ASSERT_EQ(first->size(), 100);
  std::vector<uint8_t> pixels(28 * 28);
  for (int64_t i : {0, 57, 99}) {
    first->load(i, Preprocess{}, SampleMode::eval, 0, pixels.data());  // the default: 1 x 28 x 28, as stored
    EXPECT_EQ(0, std::memcmp(pixels.data(), ds.images().data<uint8_t>() + i * 28 * 28, 28 * 28)) << i;
    EXPECT_EQ(first->label(i), ds.label(i));
  }
}

TEST(IdxDataset, FashionMnistTrainSplit) {
  if (!fs::exists(kFashion)) GTEST_SKIP() << kFashion << " is missing (Debian's dataset-fashion-mnist)";
  const auto ds = load_fashion_mnist(kFashion, "train", 0);
  ASSERT_EQ(ds->images().shape(), (Shape{60000, 1, 28, 28}));
  std::vector<int> histogram(10, 0);
  for (int64_t i = 0; i < ds->size(); ++i) ++histogram.at(static_cast<size_t>(ds->label(i)));
  EXPECT_EQ(histogram, std::vector<int>(10, 6000));
}
