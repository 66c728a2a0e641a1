// output.tensorboard: the event files read back with a reader written here from the formats'
// specifications (TFRecord framing with masked CRC-32C, protobuf's wire format, the field numbers
// of TensorBoard's event.proto, summary.proto and tensor.proto), not with the writer's code: its
// CRC is computed bit by bit, the writer's from a table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "engine/train/tensorboard.h"
#include "reliability_fixtures.h"
#include "temp_dir.h"

namespace fs = std::filesystem;
using convoy::testing::SyntheticRun;
using convoy::testing::synthetic_run_yaml;
using convoy::testing::TempDir;
using namespace convoy::testing::tiny_run;

namespace {

uint32_t bitwise_crc32c(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char b : bytes) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

uint32_t masked(const std::string& bytes) {
  const uint32_t c = bitwise_crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

template <typename T>
T little_endian(const std::string& s, size_t at) {
  T v;
  std::memcpy(&v, s.data() + at, sizeof(T));
  return v;
}

// A TFRecord file's records, each length and data checked against its masked CRC-32C.
std::vector<std::string> read_records(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  size_t at = 0;
  while (at < file.size()) {
    EXPECT_LE(at + 12, file.size()) << "a torn record header";
    if (at + 12 > file.size()) break;
    const std::string length_bytes = file.substr(at, 8);
    const uint64_t length = little_endian<uint64_t>(file, at);
    EXPECT_EQ(little_endian<uint32_t>(file, at + 8), masked(length_bytes)) << "length CRC of record " << records.size();
    EXPECT_LE(at + 12 + length + 4, file.size()) << "a torn record";
    if (at + 12 + length + 4 > file.size()) break;
    const std::string data = file.substr(at + 12, length);
    EXPECT_EQ(little_endian<uint32_t>(file, at + 12 + length), masked(data)) << "data CRC of record " << records.size();
    records.push_back(data);
    at += 12 + length + 4;
  }
  return records;
}

// A protobuf message's fields: number -> values (varints as numbers, the rest as bytes).
struct Fields {
  std::multimap<int, uint64_t> numbers;
  std::multimap<int, std::string> bytes;
  std::string one(int field) const {
    auto it = bytes.find(field);
    return it == bytes.end() ? std::string() : it->second;
  }
};

uint64_t read_varint(const std::string& s, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0; at < s.size() && shift < 64; shift += 7) {
    const auto b = static_cast<unsigned char>(s[at++]);
    v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
  ADD_FAILURE() << "a torn varint";
  return v;
}

Fields decode(const std::string& s) {
  Fields f;
  size_t at = 0;
  while (at < s.size()) {
    const uint64_t key = read_varint(s, at);
    const int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    if (wire == 0) {
      f.numbers.emplace(field, read_varint(s, at));
    } else if (wire == 1 || wire == 5) {
      const size_t n = wire == 1 ? 8 : 4;
      f.bytes.emplace(field, s.substr(at, n));
      at += n;
    } else if (wire == 2) {
      const uint64_t n = read_varint(s, at);
      f.bytes.emplace(field, s.substr(at, n));
      at += n;
    } else {
      ADD_FAILURE() << "wire type " << wire;
      break;
    }
  }
  return f;
}

// What an event file holds: its version, session starts, scalars and texts, by step.
struct Events {
  std::string file_version;
  std::vector<int64_t> session_starts;
  std::map<std::string, std::map<int64_t, float>> scalars;  // tag -> step -> value
  std::map<std::string, std::string> texts;                 // tag -> text
  std::string text_plugin;                                  // the plugin a text names
};

void read_events(const fs::path& path, Events& events) {
  for (const std::string& record : read_records(path)) {
    const Fields event = decode(record);
    ASSERT_EQ(event.one(1).size(), 8u) << "wall_time is a double";
    const double wall_time = little_endian<double>(event.one(1), 0);
    EXPECT_GT(wall_time, 1.7e9);
    const auto step_it = event.numbers.find(2);
    const int64_t step = step_it == event.numbers.end() ? 0 : static_cast<int64_t>(step_it->second);
    if (event.bytes.count(3)) events.file_version = event.one(3);
    if (event.bytes.count(7)) {
      const Fields log = decode(event.one(7));
      if (log.numbers.count(1) && log.numbers.find(1)->second == 1) events.session_starts.push_back(step);
    }
    if (!event.bytes.count(5)) continue;
    const Fields summary = decode(event.one(5));
    for (auto [it, end] = summary.bytes.equal_range(1); it != end; ++it) {
      const Fields value = decode(it->second);
      const std::string tag = value.one(1);
      if (value.bytes.count(2)) events.scalars[tag][step] = little_endian<float>(value.one(2), 0);
      if (value.bytes.count(8)) {
        const Fields tensor = decode(value.one(8));
        EXPECT_EQ(tensor.numbers.find(1)->second, 7u) << "DT_STRING";
        events.texts[tag] = tensor.one(8);
        events.text_plugin = decode(decode(value.one(9)).one(1)).one(1);
      }
    }
  }
}

std::vector<fs::path> event_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST(TensorBoard, Crc32cMatchesTheRfc3720Vectors) {
  const std::string digits = "123456789";
  EXPECT_EQ(convoy::crc32c(digits.data(), digits.size()), 0xE3069283u);
  const std::string zeros(32, '\0'), ones(32, '\xff');
  EXPECT_EQ(convoy::crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(convoy::crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(convoy::crc32c(digits.data(), digits.size()), bitwise_crc32c(digits));
}

TEST(TensorBoard, ScalarsAndTextReadBackThroughTheRecordFormat) {
  const TempDir dir("convoy-tb");
  fs::path path;
  {
    convoy::TensorBoardWriter tb(dir.path() / "tb", 0);
    path = tb.path();
    tb.scalar("train/loss", 10, 0.25);
    tb.scalar("train/loss", 20, 0.125);
    tb.text("config", 0, "    lr: 0.1\n");
    tb.flush();
  }
  Events events;
  read_events(path, events);
  EXPECT_EQ(events.file_version, "brain.Event:2");
  EXPECT_TRUE(events.session_starts.empty()) << "a fresh run starts no session over";
  EXPECT_EQ(events.scalars["train/loss"], (std::map<int64_t, float>{{10, 0.25f}, {20, 0.125f}}));
  EXPECT_EQ(events.texts["config"], "    lr: 0.1\n");
  EXPECT_EQ(events.text_plugin, "text");
}

// A run with output.tensorboard writes its config, the progress scalars every log_every steps
// and each epoch's scalars; a resumed run writes a second file that starts a session at the
// checkpoint's step (so TensorBoard drops what the first wrote after it) and goes on from there.
TEST(TensorBoard, TrainingWritesItsConfigProgressAndEpochsAndAResumeGoesOn) {
  const TempDir dir("convoy-tb-run");
  std::ofstream(dir / "tiny_model.yaml") << kTinyModel;
  SyntheticRun run;  // 256 images, batch 32: 8 steps an epoch
  run.epochs = 2;
  run.log_every = 4;
  run.tensorboard = true;
  run.output_dir = (dir / "runs").string();
  std::ofstream(dir / "tiny.yaml") << synthetic_run_yaml(run);
  auto r = convoy_run("train --config " + (dir / "tiny.yaml").string());
  ASSERT_EQ(r.status, 0) << r.output;
  const fs::path run_dir = dir / "runs/tiny";
  ASSERT_EQ(event_files(run_dir).size(), 1u);
  Events first;
  read_events(event_files(run_dir)[0], first);
  EXPECT_EQ(first.file_version, "brain.Event:2");
  EXPECT_NE(first.texts["config"].find("    batch_size: 32"), std::string::npos) << first.texts["config"];
  std::vector<int64_t> steps;
  for (const auto& [step, loss] : first.scalars["train/loss"]) {
    steps.push_back(step);
    EXPECT_TRUE(std::isfinite(loss) && loss > 0) << step << ": " << loss;
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{4, 8, 12, 16}));
  for (const char* tag : {"train/accuracy", "train/learning_rate", "train/images_per_second"})
    EXPECT_EQ(first.scalars[tag].size(), 4u) << tag;
  EXPECT_EQ(first.scalars["epoch/test_accuracy"].size(), 2u);
  EXPECT_EQ(first.scalars["epoch/epoch"], (std::map<int64_t, float>{{8, 1.f}, {16, 2.f}}));
  for (const auto& [step, acc] : first.scalars["epoch/test_accuracy"]) EXPECT_TRUE(acc >= 0 && acc <= 1) << acc;

  r = convoy_run("train --resume --config " + (dir / "tiny.yaml").string() + " --set epochs=3");
  ASSERT_EQ(r.status, 0) << r.output;
  ASSERT_EQ(event_files(run_dir).size(), 2u) << "a second file for the resumed run";
  Events resumed;
  for (const fs::path& f : event_files(run_dir)) read_events(f, resumed);  // as TensorBoard reads a run
  EXPECT_EQ(resumed.session_starts, (std::vector<int64_t>{16}));
  EXPECT_EQ(resumed.scalars["epoch/epoch"], (std::map<int64_t, float>{{8, 1.f}, {16, 2.f}, {24, 3.f}}));
}

TEST(TensorBoard, AnUnknownOutputKeyIsStillRefused) {
  const TempDir dir("convoy-tb-key");
  std::ofstream(dir / "tiny_model.yaml") << kTinyModel;
  SyntheticRun run;
  run.output_dir = (dir / "runs").string();
  std::ofstream(dir / "tiny.yaml") << synthetic_run_yaml(run);
  const auto r = convoy_run("train --config " + (dir / "tiny.yaml").string() + " --set output.tensorbord=true");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("tensorbord"), std::string::npos) << r.output;
}
