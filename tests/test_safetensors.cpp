// Safetensors checkpoints: round trip, format, Python interop, validation, atomic writes.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>


#include "temp_dir.h"
#include "input_error.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/core/error.h"

namespace fs = std::filesystem;
using namespace convoy;

using convoy::testing::write_file;

namespace {

// A temporary directory that also counts leftover temporary files (".tmp." in the name).
class TempDir : public convoy::testing::TempDir {
 public:
  TempDir() : convoy::testing::TempDir("convoy-st") {}
  int temp_files() const {
    int n = 0;
    for (const auto& e : fs::directory_iterator(path()))
      n += e.path().filename().string().find(".tmp.") != std::string::npos;
    return n;
  }
};

std::vector<uint8_t> read_all(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// A file from a header text and a data section, for hand-made malformed files.
void write_crafted(const fs::path& path, const std::string& header, size_t data_bytes,
                   uint64_t claimed_length = UINT64_MAX) {
  const uint64_t n = claimed_length == UINT64_MAX ? header.size() : claimed_length;
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(n >> (8 * i));
  bytes += header;
  bytes.append(data_bytes, '\x5A');
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string read_error(const fs::path& path) {
  return convoy::testing::input_error_of([&] { read_safetensors(path); }, "read_safetensors(" + path.string() + ")");
}

Tensor random_f32(Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  Tensor t = Tensor::empty(std::move(shape), DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

Tensor random_bf16(Shape shape, uint32_t seed) {
  const Tensor f = random_f32(shape, seed);
  Tensor t = Tensor::empty(std::move(shape), DType::bf16);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint16_t>()[i] = float_to_bf16(f.data<float>()[i]);
  return t;
}

Tensor random_u8(Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor t = Tensor::empty(std::move(shape), DType::u8);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(rng());
  return t;
}

std::vector<NamedTensor> sample_tensors() {
  std::vector<int32_t> ints = {-5, 0, 7, 2147483647, -2147483647 - 1, 42};
  Tensor f16 = Tensor::empty({3}, DType::f16);
  for (int i = 0; i < 3; ++i) f16.data<uint16_t>()[i] = float_to_f16(0.5f * static_cast<float>(i) - 1.0f);
  return {
      {"conv1.weight", random_f32({4, 1, 3, 3}, 1)},
      {"conv1.bias", random_f32({4}, 2)},
      {"fc.weight.bf16", random_bf16({3, 5}, 3)},
      {"step", Tensor::from_ints(ints, {2, 3})},
      {"pixels", random_u8({2, 1, 3, 3}, 4)},
      {"half", f16},
      {"scalar", Tensor::from_floats({3.25f}, {})},
      {"empty", Tensor::empty({0, 4}, DType::f32)},
  };
}

const std::map<std::string, std::string> kMetadata = {
    {"format", "pt"},
    {"model_yaml", "name: lenet5\nlayers:\n  - {type: conv2d, \"out\": 6}\n"},
    {"unicode", "T-shirt/top — Ankle boot ✓"},
    {"epoch", "3"},
};

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// An allocator for a pretend device whose copies to the host fail, as a lost GPU would.
class FailingAllocator final : public Allocator {
 public:
  Device device() const override { return Device::cuda(0); }
  void* allocate(size_t bytes) override { return std::malloc(bytes ? bytes : 1); }
  void deallocate(void* ptr, size_t) override { std::free(ptr); }
  void copy_to_host(void*, const void*, size_t) override { throw DeviceError("device lost"); }
  void copy_from_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_on_device(void* dst, const void* src, size_t bytes) override { std::memmove(dst, src, bytes); }
  void fill_zero(void* ptr, size_t bytes) override { std::memset(ptr, 0, bytes); }
};

}  // namespace

TEST(Safetensors, RoundTripAllDtypesAndMetadata) {
  TempDir dir;
  const auto tensors = sample_tensors();
  write_safetensors(dir / "ckpt.safetensors", tensors, kMetadata);
  EXPECT_EQ(dir.temp_files(), 0);
  const SafetensorsFile f = read_safetensors(dir / "ckpt.safetensors");
  EXPECT_EQ(f.metadata, kMetadata);
  ASSERT_EQ(f.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(f.tensors[i].name, tensors[i].name);  // file order = write order
    EXPECT_TRUE(same_bytes(f.tensors[i].tensor, tensors[i].tensor)) << tensors[i].name;
    EXPECT_TRUE(f.tensors[i].tensor.device().is_cpu());
    EXPECT_TRUE(f.contains(tensors[i].name));
    EXPECT_TRUE(same_bytes(f.at(tensors[i].name), tensors[i].tensor));
  }
  EXPECT_FALSE(f.contains("conv2.weight"));
  try {
    f.at("conv2.weight");
    ADD_FAILURE() << "at() did not throw";
  } catch (const InputError& e) {
    EXPECT_MESSAGE(e.what(), dir / "ckpt.safetensors", "no tensor 'conv2.weight'");
  }
  // No metadata and no tensors is a valid file too.
  write_safetensors(dir / "empty.safetensors", {}, {});
  const SafetensorsFile e = read_safetensors(dir / "empty.safetensors");
  EXPECT_TRUE(e.tensors.empty());
  EXPECT_TRUE(e.metadata.empty());
}

TEST(Safetensors, LayoutOnDisk) {
  TempDir dir;
  const auto tensors = sample_tensors();
  write_safetensors(dir / "a.safetensors", tensors, kMetadata);
  const auto bytes = read_all(dir / "a.safetensors");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{bytes[i]} << (8 * i);
  EXPECT_EQ(n % 8, 0u);  // data aligned to 8 bytes
  const auto header = nlohmann::json::parse(std::string(bytes.begin() + 8, bytes.begin() + 8 + n));
  EXPECT_EQ(header["__metadata__"]["epoch"], "3");
  EXPECT_EQ(header["conv1.weight"]["dtype"], "F32");
  EXPECT_EQ(header["conv1.weight"]["shape"], nlohmann::json::array({4, 1, 3, 3}));
  EXPECT_EQ(header["conv1.weight"]["data_offsets"], nlohmann::json::array({0, 144}));
  EXPECT_EQ(header["conv1.bias"]["data_offsets"], nlohmann::json::array({144, 160}));
  EXPECT_EQ(header["fc.weight.bf16"]["dtype"], "BF16");
  EXPECT_EQ(header["scalar"]["shape"], nlohmann::json::array());
  // The first tensor's raw little-endian floats follow the header.
  EXPECT_EQ(0, std::memcmp(bytes.data() + 8 + n, tensors[0].tensor.raw(), 144));
  size_t total = 0;
  for (const auto& t : tensors) total += t.tensor.nbytes();
  EXPECT_EQ(bytes.size(), 8 + n + total);
}

TEST(Safetensors, PythonReadsOurFile) {
  // Plain json + struct + numpy, not our reader: an independent decoding of the format.
  std::string python;
  for (const char* candidate : {"python3", "/usr/bin/python3"}) {
    const std::string probe = std::string(candidate) + " -c 'import numpy' >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) {
      python = candidate;
      break;
    }
  }
  if (python.empty()) GTEST_SKIP() << "no python3 with numpy (Debian's python3-numpy) found";

  TempDir dir;
  const auto tensors = sample_tensors();
  write_safetensors(dir / "golden.safetensors", tensors, kMetadata);
  const std::string script = R"PY(
import json, struct, sys
import numpy as np
raw = open(sys.argv[1], 'rb').read()
(n,) = struct.unpack('<Q', raw[:8])
header = json.loads(raw[8:8 + n].decode('utf-8'))
meta = header.pop('__metadata__', {})
data = raw[8 + n:]
kinds = {'F32': '<f4', 'F16': '<f2', 'BF16': '<u2', 'I32': '<i4', 'U8': 'u1'}
for name, info in header.items():
    begin, end = info['data_offsets']
    a = np.frombuffer(data[begin:end], dtype=kinds[info['dtype']])
    if info['dtype'] == 'BF16':
        a = (a.astype('<u4') << 16).view('<f4')
    a = a.reshape(info['shape']).astype('f8')
    weights = np.arange(1, a.size + 1, dtype='f8').reshape(a.shape)
    print('T', name, info['dtype'], 'x'.join(map(str, a.shape)) or '-', repr(float(a.sum())),
          repr(float((a * weights).sum())))
print('M', json.dumps(meta, sort_keys=True, ensure_ascii=True))
)PY";
  std::ofstream(dir / "check.py") << script;
  const std::string cmd =
      python + " '" + (dir / "check.py").string() + "' '" + (dir / "golden.safetensors").string() + "' 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buf[4096];
  while (size_t k = std::fread(buf, 1, sizeof buf, pipe)) output.append(buf, k);
  ASSERT_EQ(::pclose(pipe), 0) << output;

  std::map<std::string, std::vector<std::string>> seen;
  std::string meta_line;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string tag;
    words >> tag;
    if (tag == "M") {
      meta_line = line.substr(2);
    } else if (tag == "T") {
      std::string name, dtype, shape, sum, wsum;
      words >> name >> dtype >> shape >> sum >> wsum;
      seen[name] = {dtype, shape, sum, wsum};
    }
  }
  ASSERT_EQ(seen.size(), tensors.size()) << output;
  for (const NamedTensor& nt : tensors) {
    SCOPED_TRACE(nt.name);
    ASSERT_TRUE(seen.count(nt.name)) << output;
    const auto& got = seen[nt.name];
    EXPECT_EQ(got[0], dtype_name(nt.tensor.dtype()));
    std::string shape;
    for (int64_t d : nt.tensor.shape()) shape += (shape.empty() ? "" : "x") + std::to_string(d);
    EXPECT_EQ(got[1], shape.empty() ? "-" : shape);
    std::vector<double> values;  // i32 exactly, not through float
    if (nt.tensor.dtype() == DType::i32)
      values.assign(nt.tensor.data<int32_t>(), nt.tensor.data<int32_t>() + nt.tensor.numel());
    else
      for (float v : nt.tensor.to_floats()) values.push_back(v);
    double sum = 0, wsum = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      sum += values[i];
      wsum += values[i] * static_cast<double>(i + 1);  // catches element order mistakes
    }
    EXPECT_NEAR(std::stod(got[2]), sum, 1e-9 * (1 + std::abs(sum)));
    EXPECT_NEAR(std::stod(got[3]), wsum, 1e-9 * (1 + std::abs(wsum)));
  }
  nlohmann::json expected_meta(kMetadata);
  EXPECT_EQ(nlohmann::json::parse(meta_line), expected_meta);
}

TEST(Safetensors, NhwcTensorsAreWrittenInLogicalOrder) {
  TempDir dir;
  const int64_t n = 2, c = 3, h = 2, w = 4;
  Tensor t(Shape{n, c, h, w}, DType::f32, cpu_allocator(), Layout::nhwc);
  auto value = [&](int64_t in, int64_t ic, int64_t ih, int64_t iw) {
    return static_cast<float>(1000 * in + 100 * ic + 10 * ih + iw);
  };
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ih = 0; ih < h; ++ih)
      for (int64_t iw = 0; iw < w; ++iw)
        for (int64_t ic = 0; ic < c; ++ic)
          t.data<float>()[((in * h + ih) * w + iw) * c + ic] = value(in, ic, ih, iw);
  const std::vector<NamedTensor> tensors = {{"act", t}};
  write_safetensors(dir / "nhwc.safetensors", tensors, {});
  const Tensor back = read_safetensors(dir / "nhwc.safetensors").at("act");
  EXPECT_EQ(back.layout(), Layout::nchw);
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t ih = 0; ih < h; ++ih)
        for (int64_t iw = 0; iw < w; ++iw)
          EXPECT_EQ(back.data<float>()[((in * c + ic) * h + ih) * w + iw], value(in, ic, ih, iw));
}

TEST(Safetensors, CorruptHeaderRejected) {
  TempDir dir;
  const auto p = dir / "bad.safetensors";
  write_file(p, {1, 2, 3});
  EXPECT_MESSAGE(read_error(p), p, "too short");
  write_crafted(p, "{}", 0, /*claimed_length=*/1000);
  EXPECT_MESSAGE(read_error(p), p, "header length 1000 exceeds the file size");
  write_crafted(p, "{\"a\": {\"dtype\": \"F32\", ", 0);
  EXPECT_MESSAGE(read_error(p), p, "invalid JSON header");
  write_crafted(p, "[1, 2]", 0);
  EXPECT_MESSAGE(read_error(p), p, "not a JSON object");
  // A number beyond double's range is nlohmann's out_of_range, not a parse_error (found by
  // tests/fuzz/safetensors_fuzz).
  write_crafted(p, "{\"a\": 1e999}", 0);
  EXPECT_MESSAGE(read_error(p), p, "invalid JSON header: number overflow");
  write_crafted(p, R"({"a": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", 8);
  EXPECT_MESSAGE(read_error(p), p, "unsupported dtype 'F64'");
  write_crafted(p, R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8);
  EXPECT_MESSAGE(read_error(p), p, "shape (3,) of F32 needs 3 x 4 bytes");
  write_crafted(p, R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8);
  EXPECT_MESSAGE(read_error(p), p, "non-negative");
  write_crafted(p, R"({"a": {"dtype": "U8", "shape": [4294967296, 4294967296, 4294967296], "data_offsets": [0, 8]}})", 8);
  EXPECT_MESSAGE(read_error(p), p, "overflows");
  write_crafted(p, R"({"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8], "extra": 1}})", 8);
  EXPECT_MESSAGE(read_error(p), p, "unknown field 'extra'");
  write_crafted(p, R"({"__metadata__": {"epoch": 3}})", 0);
  EXPECT_MESSAGE(read_error(p), p, "not a string");
  write_crafted(p, R"({"a": {"dtype": "U8", "shape": [8], "data_offsets": [8, 0]}})", 8);
  EXPECT_MESSAGE(read_error(p), p, "end before they begin");
}

TEST(Safetensors, BadOffsetsRejected) {
  TempDir dir;
  const auto p = dir / "off.safetensors";
  write_crafted(p, R"({"a": {"dtype": "U8", "shape": [1000000000000], "data_offsets": [0, 1000000000000]}})", 8);
  EXPECT_MESSAGE(read_error(p), p, "out of range");
  write_crafted(p, R"({"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]},
                       "b": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]}})", 12);
  EXPECT_MESSAGE(read_error(p), p, "overlaps");
  write_crafted(p, R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}})", 8);
  EXPECT_MESSAGE(read_error(p), p, "4 unused bytes in the data before tensor 'a'");
  write_crafted(p, R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}})", 8);
  EXPECT_MESSAGE(read_error(p), p, "4 trailing bytes");
}

TEST(Safetensors, TruncatedDataRejected) {
  TempDir dir;
  write_safetensors(dir / "full.safetensors", sample_tensors(), kMetadata);
  auto bytes = read_all(dir / "full.safetensors");
  for (size_t cut : {size_t{1}, size_t{17}, bytes.size() / 2, bytes.size() - 9}) {
    const auto p = dir / "cut.safetensors";
    write_file(p, std::vector<uint8_t>(bytes.begin(), bytes.end() - static_cast<std::ptrdiff_t>(cut)));
    const std::string m = read_error(p);
    EXPECT_NE(m.find(p.string()), std::string::npos) << m;
  }
}

TEST(Safetensors, MutatedHeadersNeverCrash) {
  TempDir dir;
  write_safetensors(dir / "base.safetensors", sample_tensors(), kMetadata);
  const auto base = read_all(dir / "base.safetensors");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{base[i]} << (8 * i);
  std::mt19937 rng(5);
  const auto p = dir / "m.safetensors";
  int rejected = 0;
  for (int i = 0; i < 500; ++i) {
    auto bytes = base;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = (rng() % 8 == 0) ? rng() % 8 : 8 + rng() % n;  // mostly the JSON
      bytes[at] = (rng() % 2) ? static_cast<uint8_t>(rng()) : static_cast<uint8_t>("0123456789[]{},\":"[rng() % 17]);
    }
    write_file(p, bytes);
    try {
      read_safetensors(p);
    } catch (const InputError& e) {
      ++rejected;
      EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(rejected, 250);
}

TEST(Safetensors, MissingFileAndDirectory) {
  TempDir dir;
  EXPECT_MESSAGE(read_error(dir / "none.safetensors"), dir / "none.safetensors", "no such file");
  const std::vector<NamedTensor> t = {{"x", Tensor::zeros({2})}};
  try {
    write_safetensors(dir / "no-such-dir" / "x.safetensors", t, {});
    ADD_FAILURE() << "write into a missing directory did not throw";
  } catch (const InputError& e) {
    EXPECT_MESSAGE(e.what(), dir / "no-such-dir" / "x.safetensors", "cannot write the checkpoint");
  }
}

TEST(Safetensors, OverwriteReplacesTheFile) {
  TempDir dir;
  const auto p = dir / "c.safetensors";
  write_safetensors(p, sample_tensors(), {{"epoch", "1"}});
  const std::vector<NamedTensor> next = {{"only", random_f32({5}, 99)}};
  write_safetensors(p, next, {{"epoch", "2"}});
  const SafetensorsFile f = read_safetensors(p);
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_TRUE(same_bytes(f.at("only"), next[0].tensor));
  EXPECT_EQ(f.metadata.at("epoch"), "2");
  EXPECT_EQ(dir.temp_files(), 0);
}

TEST(Safetensors, AtomicWriteSurvivesATensorThatThrows) {
  TempDir dir;
  const auto p = dir / "c.safetensors";
  write_safetensors(p, sample_tensors(), kMetadata);
  const auto before = read_all(p);
  auto failing = std::make_shared<FailingAllocator>();
  std::vector<NamedTensor> tensors = sample_tensors();
  tensors.push_back({"on.lost.gpu", Tensor({16, 16}, DType::f32, failing)});
  EXPECT_THROW(write_safetensors(p, tensors, {{"epoch", "4"}}), DeviceError);
  EXPECT_EQ(read_all(p), before);
  EXPECT_EQ(dir.temp_files(), 0);
  EXPECT_EQ(read_safetensors(p).metadata.at("epoch"), "3");
}

TEST(Safetensors, AtomicWriteSurvivesAFullDisk) {
  // RLIMIT_FSIZE makes writes past 64 KiB fail with EFBIG, like a full disk, even as root.
  TempDir dir;
  const auto p = dir / "c.safetensors";
  write_safetensors(p, sample_tensors(), kMetadata);
  const auto before = read_all(p);
  const std::vector<NamedTensor> big = {{"big", random_f32({512, 1024}, 7)}};  // 2 MiB
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 64 * 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    write_safetensors(p, big, {});
  } catch (const InputError& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_MESSAGE(message, p, "cannot write the checkpoint");
  EXPECT_EQ(read_all(p), before);
  EXPECT_EQ(dir.temp_files(), 0);
}

TEST(Safetensors, AtomicWriteSurvivesAReadOnlyDirectory) {
  TempDir dir;
  const auto p = dir / "c.safetensors";
  write_safetensors(p, sample_tensors(), kMetadata);
  const auto before = read_all(p);
  fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec);
  const auto probe = dir / "probe";
  if (std::FILE* f = std::fopen(probe.c_str(), "wb")) {
    std::fclose(f);
    fs::remove(probe);
    fs::permissions(dir.path(), fs::perms::owner_all);
    GTEST_SKIP() << "permissions are not enforced for this user (root); the full-disk and "
                    "throwing-tensor tests cover the failure path";
  }
  const std::vector<NamedTensor> t = {{"x", Tensor::zeros({4})}};
  try {
    write_safetensors(p, t, {});
    ADD_FAILURE() << "write into a read-only directory did not throw";
  } catch (const InputError& e) {
    EXPECT_MESSAGE(e.what(), p, "cannot write the checkpoint");
  }
  fs::permissions(dir.path(), fs::perms::owner_all);
  EXPECT_EQ(read_all(p), before);
  EXPECT_EQ(dir.temp_files(), 0);
}
