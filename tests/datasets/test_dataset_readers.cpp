// The dataset readers: CIFAR binaries, image folders, CSV manifests and synthetic data. Every
// fixture is written by the test; no image is decoded (listing only), so this binary needs just
// the datasets module.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/dataset_checks.h"
#include "engine/core/error.h"
#include "tests/input_error.h"
#include "tests/temp_dir.h"

namespace fs = std::filesystem;
using namespace convoy;
using convoy::testing::input_error_of;

namespace {

struct TempDir : convoy::testing::TempDir {
  TempDir() : convoy::testing::TempDir("convoy-readers") {}
};

void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << path;
}

void write_text(const fs::path& path, const std::string& text) {
  write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

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
    write_bytes(
        dir / ("data_batch_" + std::to_string(i) + ".bin"),
        cifar_bytes({{static_cast<uint8_t>(first % 10)}, {static_cast<uint8_t>((first + 1) % 10)}}, first));
  }
  write_bytes(dir / "test_batch.bin", cifar_bytes({{7}, {8}, {9}}, 100));
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
  write_text(sub / "batches.meta.txt", meta + "\n\n");  // the official file ends with blank lines
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
  write_bytes(sub / "train.bin", cifar_bytes({{19, 99}, {3, 0}, {0, 42}}, 0));
  write_bytes(sub / "test.bin", cifar_bytes({{1, 5}}, 50));
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
  write_text(sub / "fine_label_names.txt", names);
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
  write_bytes(dir / "data_batch_4.bin", bytes);
  const std::string m = input_error_of([&] { load_cifar("cifar10", dir.path(), "train"); }, "truncated");
  EXPECT_MESSAGE(m, dir / "data_batch_4.bin",
                 "truncated: 3072 bytes is not a whole number of 3073-byte records");
  // CIFAR-100's records are one byte longer.
  write_bytes(dir / "test.bin", cifar_bytes({{1}}, 0));
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
  write_bytes(dir / "test_batch.bin", cifar_bytes({{1}, {2}, {10}}, 0));
  const std::string m = input_error_of([&] { load_cifar("cifar10", dir.path(), "test"); }, "bad label");
  EXPECT_MESSAGE(m, dir / "test_batch.bin", "label 10 of record 2 is out of range (expected 0 to 9)");
  // Within the limit, the bad record is never read.
  EXPECT_EQ(load_cifar("cifar10", dir.path(), "test", 2)->size(), 2);
  write_bytes(dir / "train.bin", cifar_bytes({{0, 100}}, 0));
  EXPECT_MESSAGE(input_error_of([&] { load_cifar("cifar100", dir.path(), "train"); }, "cifar100 label"),
                 dir / "train.bin", "label 100 of record 0");
}

TEST(Cifar, EmptySplitBadSplitBadMeta) {
  TempDir dir;
  write_cifar10(dir.path());
  write_bytes(dir / "test_batch.bin", {});
  EXPECT_MESSAGE(input_error_of([&] { load_cifar("cifar10", dir.path(), "test"); }, "empty"),
                 dir / "test_batch.bin", "no records");
  EXPECT_NE(input_error_of([&] { load_cifar("cifar10", dir.path(), "valid"); }, "split").find("'valid'"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] { load_cifar("cifar42", dir.path(), "train"); }, "kind").find("cifar42"),
            std::string::npos);
  write_text(dir / "batches.meta.txt", "a\nb\n");
  EXPECT_MESSAGE(input_error_of([&] { load_cifar("cifar10", dir.path(), "train"); }, "meta"),
                 dir / "batches.meta.txt", "has 2 class names, expected 10");
}

// ---- image folders ----------------------------------------------------------------------------

// A placeholder image file: the listing never reads it.
void touch(const fs::path& path) { write_text(path, "x"); }

// The samples' paths relative to `base`, and their labels.
std::vector<std::pair<std::string, int32_t>> listed(const FileDataset& d, const fs::path& base) {
  std::vector<std::pair<std::string, int32_t>> out;
  for (const auto& s : d.samples())
    out.emplace_back(s.path.lexically_relative(base).generic_string(), s.label);
  return out;
}

TEST(ImageFolder, ClassesLabelsAndOrder) {
  TempDir dir;
  const fs::path train = dir / "train";
  // Created out of order; classes sort bytewise ("Zebra" < "ant"), files by name.
  touch(train / "ant" / "b.png");
  touch(train / "ant" / "a.JPG");
  touch(train / "Zebra" / "z.jpeg");
  touch(train / "ant" / "notes.txt");  // not an image extension
  touch(train / "ant" / "jpg");        // no extension at all
  touch(train / "ant" / ".hidden.jpg");
  touch(train / ".cache" / "c.jpg");  // a hidden directory is no class
  touch(train / "bee" / "1.png");
  touch(train / "bee" / "sub" / "2.png");  // nested, after the class's own files
  touch(train / "bee" / "sub" / "deep" / "0.png");
  touch(train / "bee" / "sub-x" / "3.png");  // "sub-x" < "sub/deep": os.walk's sort on paths
  touch(train / "bee" / ".git" / "4.png");
  write_text(train / "README.txt", "a file beside the classes");
  auto d = load_image_folder(dir.path(), "train");
  EXPECT_EQ(d->name(), "image-folder:train");
  EXPECT_EQ(d->class_names(), (std::vector<std::string>{"Zebra", "ant", "bee"}));
  EXPECT_FALSE(d->stored_shape().has_value());
  const std::vector<std::pair<std::string, int32_t>> expected = {
      {"Zebra/z.jpeg", 0},  {"ant/a.JPG", 1},       {"ant/b.png", 1},         {"bee/1.png", 2},
      {"bee/sub/2.png", 2}, {"bee/sub-x/3.png", 2}, {"bee/sub/deep/0.png", 2}};
  EXPECT_EQ(listed(*d, train), expected);
  ASSERT_EQ(d->size(), 7);
  EXPECT_EQ(d->label(6), 2);
  EXPECT_EQ(d->samples()[0].path, train / "Zebra" / "z.jpeg");
}

TEST(ImageFolder, SymlinksFollowed) {
  TempDir dir;
  touch(dir / "elsewhere" / "cats" / "c1.jpg");
  touch(dir / "elsewhere" / "more" / "c2.jpg");
  touch(dir / "val" / "dogs" / "d.jpg");
  fs::create_directory_symlink(dir / "elsewhere" / "cats", dir / "val" / "cats");
  fs::create_directory_symlink(dir / "elsewhere" / "more", dir / "val" / "cats" / "more");
  fs::create_symlink(dir / "val" / "dogs" / "d.jpg", dir / "val" / "dogs" / "e.jpg");
  fs::create_directory_symlink(dir / "val" / "dogs",
                               dir / "val" / "dogs" / "loop");  // os.walk would never end
  auto d = load_image_folder(dir.path(), "val");
  const std::vector<std::pair<std::string, int32_t>> expected = {
      {"cats/c1.jpg", 0}, {"cats/more/c2.jpg", 0}, {"dogs/d.jpg", 1}, {"dogs/e.jpg", 1}};
  EXPECT_EQ(listed(*d, dir / "val"), expected);
}

TEST(ImageFolder, Errors) {
  TempDir dir;
  EXPECT_MESSAGE(input_error_of([&] { load_image_folder(dir / "nope", "train"); }, "no root"), dir / "nope",
                 "no such directory");
  touch(dir / "train" / "a" / "1.png");
  touch(dir / "val" / "a" / "1.png");
  const std::string no_split = input_error_of([&] { load_image_folder(dir.path(), "test"); }, "no split");
  EXPECT_MESSAGE(no_split, dir / "test", "no such directory");
  EXPECT_NE(no_split.find("the splits in " + dir.path().string() + ": train, val"), std::string::npos)
      << no_split;

  fs::create_directories(dir / "empty");
  touch(dir / "empty" / "loose.jpg");
  EXPECT_MESSAGE(input_error_of([&] { load_image_folder(dir.path(), "empty"); }, "no classes"), dir / "empty",
                 "no class directories");

  touch(dir / "train" / "b" / "notes.txt");
  touch(dir / "train" / "b" / ".hidden.png");
  EXPECT_MESSAGE(input_error_of([&] { load_image_folder(dir.path(), "train"); }, "empty class"),
                 dir / "train" / "b", "class 'b' has no images (.jpg, .jpeg, .png)");
  EXPECT_NE(input_error_of([&] { load_image_folder(dir.path(), "train", -1); }, "limit").find("limit"),
            std::string::npos);
}

TEST(ImageFolder, LimitInterleavesClasses) {
  TempDir dir;
  // Class sizes 5, 1, 3: the interleaved order is a0 b0 c0 a1 c1 a2 c2 a3 a4.
  for (int i = 0; i < 5; ++i) touch(dir / "train" / "a" / (std::to_string(i) + ".png"));
  touch(dir / "train" / "b" / "0.png");
  for (int i = 0; i < 3; ++i) touch(dir / "train" / "c" / (std::to_string(i) + ".png"));
  const fs::path train = dir / "train";
  auto three = load_image_folder(dir.path(), "train", 3);
  EXPECT_EQ(listed(*three, train),
            (std::vector<std::pair<std::string, int32_t>>{{"a/0.png", 0}, {"b/0.png", 1}, {"c/0.png", 2}}));
  auto six = load_image_folder(dir.path(), "train", 6);
  EXPECT_EQ(
      listed(*six, train),
      (std::vector<std::pair<std::string, int32_t>>{
          {"a/0.png", 0}, {"a/1.png", 0}, {"a/2.png", 0}, {"b/0.png", 1}, {"c/0.png", 2}, {"c/1.png", 2}}));
  auto two = load_image_folder(dir.path(), "train", 2);  // fewer than the classes: the first ones
  EXPECT_EQ(listed(*two, train),
            (std::vector<std::pair<std::string, int32_t>>{{"a/0.png", 0}, {"b/0.png", 1}}));
  EXPECT_EQ(two->class_names().size(), 3u);  // a limit never drops a class from the label space
  EXPECT_EQ(load_image_folder(dir.path(), "train", 9)->size(), 9);
  EXPECT_EQ(load_image_folder(dir.path(), "train", 100)->size(), 9);
  EXPECT_EQ(listed(*load_image_folder(dir.path(), "train", 9), train),
            listed(*load_image_folder(dir.path(), "train"), train));
}

TEST(ImageFolder, CheckSameClasses) {
  TempDir dir;
  for (const char* c : {"cat", "dog", "emu"}) touch(dir / "train" / c / "1.jpg");
  for (const char* c : {"cat", "dog", "emu"}) touch(dir / "val" / c / "1.jpg");
  for (const char* c : {"cat", "dog"}) touch(dir / "short" / c / "1.jpg");
  for (const char* c : {"cat", "eel", "emu"}) touch(dir / "other" / c / "1.jpg");
  auto train = load_image_folder(dir.path(), "train");
  auto val = load_image_folder(dir.path(), "val");
  EXPECT_NO_THROW(check_same_classes(*train, *val));
  auto other = load_image_folder(dir.path(), "other");
  const std::string m = input_error_of([&] { check_same_classes(*train, *other); }, "different classes");
  EXPECT_NE(m.find("image-folder:train and image-folder:other"), std::string::npos) << m;
  EXPECT_NE(m.find("class 1 is 'dog' in image-folder:train but 'eel' in image-folder:other"),
            std::string::npos)
      << m;
  auto shorter = load_image_folder(dir.path(), "short");
  const std::string s = input_error_of([&] { check_same_classes(*train, *shorter); }, "fewer classes");
  EXPECT_NE(s.find("class 2 'emu' of image-folder:train is missing from image-folder:short"),
            std::string::npos)
      << s;
  const std::string r = input_error_of([&] { check_same_classes(*shorter, *train); }, "more classes");
  EXPECT_NE(r.find("class 2 'emu' of image-folder:train is missing from image-folder:short"),
            std::string::npos)
      << r;
}

// ---- CSV manifests ----------------------------------------------------------------------------

TEST(CsvManifest, RelativeAbsoluteHeaderAndNames) {
  TempDir dir;
  touch(dir / "img" / "a.jpg");
  touch(dir / "img" / "b.png");
  touch(dir / "elsewhere" / "c.jpg");
  touch(dir / "img" / "a,b.jpg");
  touch(dir / "img" / "say \"hi\".jpg");
  write_text(dir / "train.csv",
             "path,label\r\n"
             "img/a.jpg,dog\r\n"
             "\r\n"
             "img/b.png, cat\r\n" +
                 (dir / "elsewhere" / "c.jpg").string() +
                 ",dog\r\n"
                 "\"img/a,b.jpg\",\"bird\"\r\n"
                 "\"img/say \"\"hi\"\".jpg\",cat\r\n");
  auto d = load_csv_manifest(dir.path(), "train");  // the directory form: <dir>/train.csv
  EXPECT_EQ(d->name(), "csv:train");
  EXPECT_EQ(d->class_names(), (std::vector<std::string>{"bird", "cat", "dog"}));
  ASSERT_EQ(d->size(), 5);
  EXPECT_EQ(d->samples()[0].path, dir / "img" / "a.jpg");
  EXPECT_EQ(d->label(0), 2);
  EXPECT_EQ(d->samples()[1].path, dir / "img" / "b.png");
  EXPECT_EQ(d->label(1), 1);
  EXPECT_EQ(d->samples()[2].path, dir / "elsewhere" / "c.jpg");
  EXPECT_EQ(d->samples()[3].path, dir / "img" / "a,b.jpg");
  EXPECT_EQ(d->label(3), 0);
  EXPECT_EQ(d->samples()[4].path, dir / "img" / "say \"hi\".jpg");

  // The file form, no header; paths relative to the manifest's own directory.
  write_text(dir / "img" / "list.csv", "a.jpg,dog\nb.png,dog");
  auto f = load_csv_manifest(dir / "img" / "list.csv", "val");
  EXPECT_EQ(f->name(), "csv:val");
  ASSERT_EQ(f->size(), 2);
  EXPECT_EQ(f->samples()[1].path, dir / "img" / "b.png");
  EXPECT_EQ(f->class_names(), (std::vector<std::string>{"dog"}));
}

TEST(CsvManifest, IntegerLabelsSortNumerically) {
  TempDir dir;
  for (const char* n : {"a", "b", "c", "d"}) touch(dir / (std::string(n) + ".png"));
  write_text(dir / "m.csv", "a.png,10\nb.png,2\nc.png,02\nd.png,9\n");
  auto d = load_csv_manifest(dir / "m.csv", "train");
  EXPECT_EQ(d->class_names(), (std::vector<std::string>{"2", "9", "10"}));
  EXPECT_EQ(d->label(0), 2);
  EXPECT_EQ(d->label(1), 0);
  EXPECT_EQ(d->label(2), 0);  // "02" is class 2
  EXPECT_EQ(d->label(3), 1);
  // One non-number makes every label a name, sorted bytewise.
  write_text(dir / "m.csv", "a.png,10\nb.png,2\nc.png,x\n");
  EXPECT_EQ(load_csv_manifest(dir / "m.csv", "train")->class_names(),
            (std::vector<std::string>{"10", "2", "x"}));
}

TEST(CsvManifest, LimitInterleavesClassesKeepingLabels) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 4; ++i) {
    const std::string name = std::to_string(i) + "a.png";
    touch(dir / name);
    text += name + ",ant\n";
  }
  touch(dir / "z.png");
  text += "z.png,zebra\n";
  write_text(dir / "m.csv", text);
  auto d = load_csv_manifest(dir / "m.csv", "train", 2);
  ASSERT_EQ(d->size(), 2);
  EXPECT_EQ(d->samples()[0].path, dir / "0a.png");
  EXPECT_EQ(d->samples()[1].path, dir / "z.png");
  EXPECT_EQ(d->label(1), 1);
  EXPECT_EQ(d->class_names().size(), 2u);
}

TEST(CsvManifest, ErrorsNameFileAndLine) {
  TempDir dir;
  touch(dir / "a.jpg");
  const fs::path m = dir / "train.csv";
  auto error = [&] { return input_error_of([&] { load_csv_manifest(m, "train"); }, "manifest error"); };

  write_text(m, "path,label\na.jpg,1\na.jpg,1,extra\n");
  EXPECT_MESSAGE(error(), fs::path(m.string() + ":3"), "expected 2 fields (path,label), found 3");
  write_text(m, "a.jpg\n");
  EXPECT_MESSAGE(error(), fs::path(m.string() + ":1"), "found 1");
  write_text(m, "a.jpg,1\n,2\n");
  EXPECT_MESSAGE(error(), fs::path(m.string() + ":2"), "empty path");
  write_text(m, "a.jpg,1\n\"b\nc.jpg\",1\nmissing1.jpg,1\nmissing2.jpg,0\n");  // a quoted line break
  const std::string missing = error();
  EXPECT_MESSAGE(missing, fs::path(m.string() + ":2"), "no such file " + (dir / "b\nc.jpg").string());
  EXPECT_NE(missing.find("3 of the 4 files listed are missing"), std::string::npos) << missing;
  write_text(m, "a.jpg,1\nmissing.jpg,1\n");
  EXPECT_MESSAGE(error(), fs::path(m.string() + ":2"), "no such file " + (dir / "missing.jpg").string());
  write_text(m, "a.jpg,1\n\"a.jpg\"x,1\n");
  EXPECT_MESSAGE(error(), fs::path(m.string() + ":2"), "unexpected text after a quoted field");
  write_text(m, "a.jpg,1\n\"a.jpg,1\n");
  EXPECT_MESSAGE(error(), fs::path(m.string() + ":2"), "never closed");
  write_text(m, "path,label\n\n");
  EXPECT_MESSAGE(error(), m, "lists no samples");

  const std::string no_split = input_error_of([&] { load_csv_manifest(dir.path(), "val"); }, "no val.csv");
  EXPECT_MESSAGE(no_split, dir / "val.csv", "no such file");
  EXPECT_NE(no_split.find("train.csv"), std::string::npos) << no_split;
  EXPECT_MESSAGE(input_error_of([&] { load_csv_manifest(dir / "nope", "val"); }, "no manifest"), dir / "nope",
                 "no such file or directory");
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
