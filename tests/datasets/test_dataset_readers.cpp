// The file dataset readers: image folders and CSV manifests (CIFAR and synthetic data are in
// test_memory_readers.cpp). Every fixture is written by the test; no image is decoded (listing
// only), so this binary needs just the datasets module.
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

using convoy::testing::TempDir;
using convoy::testing::write_text_file;

namespace {

// ---- image folders ----------------------------------------------------------------------------

// A placeholder image file: the listing never reads it.
void touch(const fs::path& path) { write_text_file(path, "x"); }

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
  write_text_file(train / "README.txt", "a file beside the classes");
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
  write_text_file(dir / "train.csv",
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
  write_text_file(dir / "img" / "list.csv", "a.jpg,dog\nb.png,dog");
  auto f = load_csv_manifest(dir / "img" / "list.csv", "val");
  EXPECT_EQ(f->name(), "csv:val");
  ASSERT_EQ(f->size(), 2);
  EXPECT_EQ(f->samples()[1].path, dir / "img" / "b.png");
  EXPECT_EQ(f->class_names(), (std::vector<std::string>{"dog"}));
}

TEST(CsvManifest, IntegerLabelsSortNumerically) {
  TempDir dir;
  for (const char* n : {"a", "b", "c", "d"}) touch(dir / (std::string(n) + ".png"));
  write_text_file(dir / "m.csv", "a.png,10\nb.png,2\nc.png,02\nd.png,9\n");
  auto d = load_csv_manifest(dir / "m.csv", "train");
  EXPECT_EQ(d->class_names(), (std::vector<std::string>{"2", "9", "10"}));
  EXPECT_EQ(d->label(0), 2);
  EXPECT_EQ(d->label(1), 0);
  EXPECT_EQ(d->label(2), 0);  // "02" is class 2
  EXPECT_EQ(d->label(3), 1);
  // One non-number makes every label a name, sorted bytewise.
  write_text_file(dir / "m.csv", "a.png,10\nb.png,2\nc.png,x\n");
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
  write_text_file(dir / "m.csv", text);
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

  write_text_file(m, "path,label\na.jpg,1\na.jpg,1,extra\n");
  EXPECT_MESSAGE(error(), fs::path(m.string() + ":3"), "expected 2 fields (path,label), found 3");
  write_text_file(m, "a.jpg\n");
  EXPECT_MESSAGE(error(), fs::path(m.string() + ":1"), "found 1");
  write_text_file(m, "a.jpg,1\n,2\n");
  EXPECT_MESSAGE(error(), fs::path(m.string() + ":2"), "empty path");
  write_text_file(m, "a.jpg,1\n\"b\nc.jpg\",1\nmissing1.jpg,1\nmissing2.jpg,0\n");  // a quoted line break
  const std::string missing = error();
  EXPECT_MESSAGE(missing, fs::path(m.string() + ":2"), "no such file " + (dir / "b\nc.jpg").string());
  EXPECT_NE(missing.find("3 of the 4 files listed are missing"), std::string::npos) << missing;
  write_text_file(m, "a.jpg,1\nmissing.jpg,1\n");
  EXPECT_MESSAGE(error(), fs::path(m.string() + ":2"), "no such file " + (dir / "missing.jpg").string());
  write_text_file(m, "a.jpg,1\n\"a.jpg\"x,1\n");
  EXPECT_MESSAGE(error(), fs::path(m.string() + ":2"), "unexpected text after a quoted field");
  write_text_file(m, "a.jpg,1\n\"a.jpg,1\n");
  EXPECT_MESSAGE(error(), fs::path(m.string() + ":2"), "never closed");
  write_text_file(m, "path,label\n\n");
  EXPECT_MESSAGE(error(), m, "lists no samples");

  const std::string no_split = input_error_of([&] { load_csv_manifest(dir.path(), "val"); }, "no val.csv");
  EXPECT_MESSAGE(no_split, dir / "val.csv", "no such file");
  EXPECT_NE(no_split.find("train.csv"), std::string::npos) << no_split;
  EXPECT_MESSAGE(input_error_of([&] { load_csv_manifest(dir / "nope", "val"); }, "no manifest"), dir / "nope",
                 "no such file or directory");
}

}  // namespace
