// decode_image: PNGs written here with zlib (an encoder independent of OpenCV), decoded
// through OpenCV, compared pixel by pixel.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "datasets/image_decode.h"
#include "engine/core/error.h"

namespace fs = std::filesystem;
using namespace convoy;

namespace {

struct TempDir : convoy::testing::TempDir {
  TempDir() : convoy::testing::TempDir("convoy-img") {}
};

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}

void put_chunk(std::vector<uint8_t>& out, const char* type, const std::vector<uint8_t>& data) {
  put_u32(out, static_cast<uint32_t>(data.size()));
  std::vector<uint8_t> body(type, type + 4);
  body.insert(body.end(), data.begin(), data.end());
  out.insert(out.end(), body.begin(), body.end());
  put_u32(out, static_cast<uint32_t>(crc32(0, body.data(), static_cast<uInt>(body.size()))));
}

// A PNG of `height` x `width` pixels from interleaved samples (big-endian for 16-bit).
// color_type: 0 gray, 2 RGB, 4 gray+alpha, 6 RGBA.
std::vector<uint8_t> make_png(int width, int height, int color_type, int bit_depth,
                              const std::vector<uint8_t>& samples) {
  const int channels = color_type == 0 ? 1 : color_type == 2 ? 3 : color_type == 4 ? 2 : 4;
  const size_t row = static_cast<size_t>(width) * channels * (bit_depth / 8);
  EXPECT_EQ(samples.size(), row * height);
  std::vector<uint8_t> raw;
  for (int y = 0; y < height; ++y) {
    raw.push_back(0);  // filter: none
    raw.insert(raw.end(), samples.begin() + y * row, samples.begin() + (y + 1) * row);
  }
  uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
  std::vector<uint8_t> packed(packed_size);
  EXPECT_EQ(compress(packed.data(), &packed_size, raw.data(), static_cast<uLong>(raw.size())), Z_OK);
  packed.resize(packed_size);

  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  std::vector<uint8_t> ihdr;
  put_u32(ihdr, static_cast<uint32_t>(width));
  put_u32(ihdr, static_cast<uint32_t>(height));
  ihdr.insert(ihdr.end(), {static_cast<uint8_t>(bit_depth), static_cast<uint8_t>(color_type), 0, 0, 0});
  put_chunk(png, "IHDR", ihdr);
  put_chunk(png, "IDAT", packed);
  put_chunk(png, "IEND", {});
  return png;
}

void write_all(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

uint8_t at(const Tensor& t, int64_t c, int64_t y, int64_t x) {
  return t.data<uint8_t>()[(c * t.dim(1) + y) * t.dim(2) + x];
}

std::string decode_error(const fs::path& path, int64_t channels = 3, int64_t h = 4, int64_t w = 4) {
  try {
    decode_image(path, channels, h, w);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "decode_image(" << path << ") did not throw";
  return {};
}

#define SKIP_WITHOUT_OPENCV()                                                            \
  if (!image_decode_available())                                                         \
  GTEST_SKIP() << "built without OpenCV (CONVOY_OPENCV=OFF or libopencv-dev missing)"

}  // namespace

TEST(ImageDecode, RgbPngKeepsRgbOrder) {
  SKIP_WITHOUT_OPENCV();
  TempDir dir;
  const int w = 5, h = 4;
  std::vector<uint8_t> px;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) px.insert(px.end(), {uint8_t(10 * x), uint8_t(50 * y), uint8_t(200 + x + y)});
  write_all(dir / "rgb.png", make_png(w, h, 2, 8, px));
  const Tensor t = decode_image(dir / "rgb.png", 3, h, w);
  ASSERT_EQ(t.shape(), (Shape{3, h, w}));
  EXPECT_EQ(t.dtype(), DType::u8);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      EXPECT_EQ(at(t, 0, y, x), 10 * x);
      EXPECT_EQ(at(t, 1, y, x), 50 * y);
      EXPECT_EQ(at(t, 2, y, x), 200 + x + y);
    }
  // To gray: ITU-R BT.601 luma, as OpenCV computes it.
  const Tensor g = decode_image(dir / "rgb.png", 1, h, w);
  ASSERT_EQ(g.shape(), (Shape{1, h, w}));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      EXPECT_NEAR(at(g, 0, y, x), 0.299 * 10 * x + 0.587 * 50 * y + 0.114 * (200 + x + y), 1.0);
  // To RGBA: opaque.
  const Tensor a = decode_image(dir / "rgb.png", 4, h, w);
  EXPECT_EQ(at(a, 0, 1, 3), 30);
  EXPECT_EQ(at(a, 3, 2, 2), 255);
}

TEST(ImageDecode, GrayAlphaAndSixteenBit) {
  SKIP_WITHOUT_OPENCV();
  TempDir dir;
  write_all(dir / "gray.png", make_png(3, 2, 0, 8, {0, 100, 255, 7, 8, 9}));
  const Tensor g = decode_image(dir / "gray.png", 1, 2, 3);
  EXPECT_EQ(std::vector<uint8_t>(g.data<uint8_t>(), g.data<uint8_t>() + 6),
            (std::vector<uint8_t>{0, 100, 255, 7, 8, 9}));
  const Tensor rgb = decode_image(dir / "gray.png", 3, 2, 3);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(at(rgb, c, 0, 1), 100);

  write_all(dir / "rgba.png", make_png(2, 1, 6, 8, {1, 2, 3, 40, 5, 6, 7, 80}));
  const Tensor keep = decode_image(dir / "rgba.png", 4, 1, 2);
  EXPECT_EQ(std::vector<uint8_t>(keep.data<uint8_t>(), keep.data<uint8_t>() + 8),
            (std::vector<uint8_t>{1, 5, 2, 6, 3, 7, 40, 80}));  // planes R, G, B, A
  const Tensor drop = decode_image(dir / "rgba.png", 3, 1, 2);
  EXPECT_EQ(std::vector<uint8_t>(drop.data<uint8_t>(), drop.data<uint8_t>() + 6),
            (std::vector<uint8_t>{1, 5, 2, 6, 3, 7}));

  write_all(dir / "ga.png", make_png(2, 1, 4, 8, {90, 10, 180, 255}));
  const Tensor ga = decode_image(dir / "ga.png", 1, 1, 2);
  EXPECT_EQ(at(ga, 0, 0, 0), 90);
  EXPECT_EQ(at(ga, 0, 0, 1), 180);

  // 16-bit gray: 65535 -> 255, 257 * 100 -> 100, 0 -> 0.
  write_all(dir / "g16.png", make_png(3, 1, 0, 16, {0xFF, 0xFF, 0x64, 0x64, 0, 0}));
  const Tensor g16 = decode_image(dir / "g16.png", 1, 1, 3);
  EXPECT_EQ(std::vector<uint8_t>(g16.data<uint8_t>(), g16.data<uint8_t>() + 3),
            (std::vector<uint8_t>{255, 100, 0}));
}

TEST(ImageDecode, Resize) {
  SKIP_WITHOUT_OPENCV();
  TempDir dir;
  // 8x8 of 2x2 constant blocks: INTER_AREA halving gives each block's value exactly.
  std::vector<uint8_t> px(64);
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 8; ++x) px[y * 8 + x] = static_cast<uint8_t>(16 * (y / 2) + 3 * (x / 2));
  write_all(dir / "blocks.png", make_png(8, 8, 0, 8, px));
  const Tensor small = decode_image(dir / "blocks.png", 1, 4, 4);
  ASSERT_EQ(small.shape(), (Shape{1, 4, 4}));
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) EXPECT_EQ(at(small, 0, y, x), 16 * y + 3 * x);
  // Enlarging a constant image keeps it constant; odd target sizes are fine.
  write_all(dir / "flat.png", make_png(3, 2, 2, 8, std::vector<uint8_t>(18, 77)));
  const Tensor big = decode_image(dir / "flat.png", 3, 7, 11);
  ASSERT_EQ(big.shape(), (Shape{3, 7, 11}));
  for (int64_t i = 0; i < big.numel(); ++i) ASSERT_EQ(big.data<uint8_t>()[i], 77);
}

TEST(ImageDecode, BadFilesRejected) {
  SKIP_WITHOUT_OPENCV();
  TempDir dir;
  std::ofstream(dir / "notes.png") << "this is a text file, not a picture\n";
  auto m = decode_error(dir / "notes.png");
  EXPECT_NE(m.find((dir / "notes.png").string()), std::string::npos) << m;
  EXPECT_NE(m.find("not a readable image"), std::string::npos) << m;

  m = decode_error(dir / "missing.png");
  EXPECT_NE(m.find((dir / "missing.png").string() + ": no such file"), std::string::npos) << m;

  write_all(dir / "empty.png", {});
  EXPECT_NE(decode_error(dir / "empty.png").find("empty file"), std::string::npos);

  std::vector<uint8_t> px(32 * 32 * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 7);
  auto png = make_png(32, 32, 2, 8, px);
  png.resize(png.size() / 3);
  write_all(dir / "cut.png", png);
  m = decode_error(dir / "cut.png");
  EXPECT_NE(m.find((dir / "cut.png").string()), std::string::npos) << m;

  write_all(dir / "ok.png", make_png(2, 2, 0, 8, {1, 2, 3, 4}));
  EXPECT_NE(decode_error(dir / "ok.png", 2).find("expected 1, 3 or 4"), std::string::npos);
  EXPECT_NE(decode_error(dir / "ok.png", 3, 0, 4).find("size"), std::string::npos);
}

TEST(ImageDecode, UnavailableBuildSaysWhy) {
  if (image_decode_available()) GTEST_SKIP() << "this build has OpenCV";
  TempDir dir;
  const std::string m = decode_error(dir / "x.png");
  EXPECT_NE(m.find("built without OpenCV (CONVOY_OPENCV=OFF"), std::string::npos) << m;
}
