// The image codecs (datasets/image_codec.h) and image files read as `convoy infer IMAGE` and the
// image datasets read them (FileDataset::load): fixtures encoded here with encode_jpeg /
// encode_png into a temporary directory, decoded back, compared.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/image_codec.h"
#include "datasets/preprocess.h"
#include "datasets/resample.h"
#include "engine/core/error.h"
#include "input_error.h"
#include "temp_dir.h"

namespace fs = std::filesystem;
using namespace convoy;
using convoy::testing::input_error_of;

using convoy::testing::write_file;

namespace {

struct TempDir : convoy::testing::TempDir {
  TempDir() : convoy::testing::TempDir("convoy-img") {}
};

uint8_t at(const Tensor& t, int64_t c, int64_t y, int64_t x) {
  return t.data<uint8_t>()[(c * t.dim(1) + y) * t.dim(2) + x];
}

// A smooth colour picture with some texture: what JPEG is made for. (H, W, C) u8.
std::vector<uint8_t> picture(int64_t width, int64_t height, int64_t channels) {
  std::vector<uint8_t> px(static_cast<size_t>(width * height * channels));
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x)
      for (int64_t c = 0; c < channels; ++c) {
        const double v = 128 + 90 * std::sin(0.05 * x * (c + 1) + 0.03 * y) * std::cos(0.04 * y - 0.5 * c);
        px[(y * width + x) * channels + c] = static_cast<uint8_t>(std::lround(v));
      }
  return px;
}

// Any pattern: for lossless round trips.
std::vector<uint8_t> pattern(int64_t n, int mul = 37) {
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * mul + i / 7) & 0xFF);
  return v;
}

double mean_abs_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  EXPECT_EQ(a.size(), b.size());
  double sum = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) sum += std::abs(int(a[i]) - int(b[i]));
  return sum / static_cast<double>(a.size());
}

std::string decode_bytes_error(const std::vector<uint8_t>& bytes, const std::string& name) {
  return input_error_of([&] { decode_image(bytes, name); }, "decode_image(" + name + ")");
}

// The image file at `path` as FileDataset::load reads it: the whole image resized to
// (channels, height, width) u8.
Tensor load_image_file(const fs::path& path, int64_t channels, int64_t height, int64_t width) {
  const FileDataset files("images", {"any"}, {{path, 0}});
  Preprocess p;
  p.channels = channels;
  p.height = height;
  p.width = width;
  Tensor out = Tensor::empty({channels, height, width}, DType::u8);
  files.load(0, p, SampleMode::eval, 0, out.data<uint8_t>());
  return out;
}

}  // namespace

TEST(ImageCodec, FormatByMagicNotByName) {
  const std::vector<uint8_t> px = pattern(4 * 3);
  EXPECT_EQ(image_format_of(encode_png(px.data(), 4, 3, 1)), ImageFormat::png);
  EXPECT_EQ(image_format_of(encode_jpeg(px.data(), 4, 3, 1, 90)), ImageFormat::jpeg);
  EXPECT_EQ(image_format_of(std::vector<uint8_t>{'G', 'I', 'F', '8', '9', 'a'}), ImageFormat::unknown);
  EXPECT_EQ(image_format_of(std::vector<uint8_t>{}), ImageFormat::unknown);

  // A JPEG named .png decodes as the JPEG it is.
  TempDir dir;
  write_file(dir / "really_a.png", encode_jpeg(picture(16, 8, 3).data(), 16, 8, 3, 95));
  const Tensor t = load_image_file(dir / "really_a.png", 3, 8, 16);
  EXPECT_EQ(t.shape(), (Shape{3, 8, 16}));
}

TEST(ImageCodec, PngRoundTripsExactly) {
  const int64_t w = 7, h = 5;
  // Gray, RGB: the samples as they were.
  for (int64_t channels : {1, 3}) {
    const std::vector<uint8_t> px = pattern(w * h * channels);
    const DecodedImage d = decode_png(encode_png(px.data(), w, h, channels), "x.png");
    EXPECT_EQ(d.width, w);
    EXPECT_EQ(d.height, h);
    EXPECT_EQ(d.channels, channels);
    EXPECT_EQ(d.scale, 1.0);
    EXPECT_EQ(d.pixels, px) << channels << " channels";
  }
  // Gray + alpha, RGBA: alpha dropped, the colour kept whatever the alpha (no compositing).
  for (int64_t channels : {2, 4}) {
    const std::vector<uint8_t> px = pattern(w * h * channels, 53);
    const DecodedImage d = decode_png(encode_png(px.data(), w, h, channels), "x.png");
    ASSERT_EQ(d.channels, channels - 1);
    std::vector<uint8_t> want;
    for (int64_t i = 0; i < w * h; ++i)
      for (int64_t c = 0; c < channels - 1; ++c) want.push_back(px[i * channels + c]);
    EXPECT_EQ(d.pixels, want) << channels << " channels";
  }
  // 16-bit gray and RGB: v * 257 reads back as v, and values between round to nearest.
  for (int64_t channels : {1, 3}) {
    const std::vector<uint8_t> want = pattern(w * h * channels, 11);
    std::vector<uint16_t> px16(want.size());
    for (size_t i = 0; i < want.size(); ++i) px16[i] = static_cast<uint16_t>(want[i] * 257 + (i % 3 == 0 ? 100 : 0));
    const DecodedImage d = decode_png(encode_png(px16.data(), w, h, channels, 16), "x.png");
    ASSERT_EQ(d.channels, channels);
    EXPECT_EQ(d.pixels, want) << channels << " channels, 16-bit";
  }
  // Palette: each index becomes its entry.
  const std::vector<uint8_t> palette = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30};
  std::vector<uint8_t> indices(w * h);
  for (int64_t i = 0; i < w * h; ++i) indices[i] = static_cast<uint8_t>(i % 4);
  const DecodedImage d = decode_png(encode_png_palette(indices.data(), w, h, palette), "p.png");
  ASSERT_EQ(d.channels, 3);
  for (int64_t i = 0; i < w * h; ++i)
    for (int c = 0; c < 3; ++c) ASSERT_EQ(d.pixels[i * 3 + c], palette[indices[i] * 3 + c]) << i;
}

TEST(ImageCodec, JpegDecodesCloseToItsSource) {
  const int64_t w = 96, h = 64;
  for (int64_t channels : {3, 1}) {
    const std::vector<uint8_t> px = picture(w, h, channels);
    const DecodedImage d = decode_jpeg(encode_jpeg(px.data(), w, h, channels, 95), "x.jpg");
    ASSERT_EQ(d.width, w);
    ASSERT_EQ(d.height, h);
    ASSERT_EQ(d.channels, channels);  // gray stays gray
    EXPECT_LT(mean_abs_diff(d.pixels, px), 2.0) << channels << " channels";
  }
}

TEST(ImageCodec, JpegDctScalingWhenTheBoxAllows) {
  const int64_t w = 400, h = 300;
  const std::vector<uint8_t> px = picture(w, h, 3);
  const std::vector<uint8_t> jpeg = encode_jpeg(px.data(), w, h, 3, 95);

  // 400x300 to 100x75: a quarter covers it exactly; 101 wide needs a half (3/8 would do, but
  // TurboJPEG's 3/8 to 7/8 are slower than a full decode, so they are not used).
  ScaleHint hint{400, 300, 100, 75};
  DecodedImage d = decode_jpeg(jpeg, "x.jpg", &hint);
  EXPECT_EQ(d.scale, 0.25);
  EXPECT_EQ(d.width, 100);
  EXPECT_EQ(d.height, 75);
  hint.min_width = 101;
  EXPECT_EQ(decode_jpeg(jpeg, "x.jpg", &hint).scale, 0.5);
  hint.min_width = 201;
  EXPECT_EQ(decode_jpeg(jpeg, "x.jpg", &hint).scale, 1.0);
  // Enlarging: no scaling.
  hint = {40, 30, 64, 64};
  EXPECT_EQ(decode_jpeg(jpeg, "x.jpg", &hint).scale, 1.0);

  // decode_preprocess (a DCT-scaled decode, then the resampler) against a full decode
  // resampled: close, though not the same filter.
  Preprocess p;
  p.channels = 3;
  p.width = 90;
  p.height = 60;
  p.resize = 0;
  std::vector<uint8_t> fast(3 * 60 * 90), slow(3 * 60 * 90);
  decode_preprocess(jpeg, "x.jpg", p, SampleMode::eval, 0, fast.data());
  const DecodedImage full = decode_jpeg(jpeg, "x.jpg");
  resample_bilinear(full.pixels.data(), w, h, 3, PixelLayout::interleaved, CropBox{0, 0, 400, 300}, 90, 60,
                    slow.data(), PixelLayout::planar);
  EXPECT_LT(mean_abs_diff(fast, slow), 1.5);

  // The same with a crop box (eval: resize 128, centre 96x96), mapped into the scaled image.
  p.width = p.height = 96;
  p.resize = 128;
  fast.assign(3 * 96 * 96, 0);
  slow.assign(3 * 96 * 96, 0);
  decode_preprocess(jpeg, "x.jpg", p, SampleMode::eval, 0, fast.data());
  resample_bilinear(full.pixels.data(), w, h, 3, PixelLayout::interleaved, center_crop_box(w, h, p), 96, 96,
                    slow.data(), PixelLayout::planar);
  EXPECT_LT(mean_abs_diff(fast, slow), 1.5);
}

TEST(ImageCodec, BadBytesAreInputErrorsNamingTheFile) {
  const std::vector<uint8_t> px = picture(64, 48, 3);
  const std::vector<uint8_t> jpeg = encode_jpeg(px.data(), 64, 48, 3, 90);
  const std::vector<uint8_t> png = encode_png(px.data(), 64, 48, 3);

  EXPECT_MESSAGE(decode_bytes_error({}, "empty.jpg"), fs::path("empty.jpg"), "empty file");
  const std::string text = "this is a text file, not a picture\n";
  EXPECT_MESSAGE(decode_bytes_error(std::vector<uint8_t>(text.begin(), text.end()), "notes.png"),
                 fs::path("notes.png"), "not a JPEG or PNG image");
  EXPECT_MESSAGE(decode_bytes_error({'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0}, "anim.gif"), fs::path("anim.gif"),
                 "not a JPEG or PNG image");
  EXPECT_MESSAGE(decode_bytes_error({0xFF, 0xD8, 0xFF}, "magic_only.jpg"), fs::path("magic_only.jpg"), "JPEG");
  EXPECT_MESSAGE(decode_bytes_error(std::vector<uint8_t>(png.begin(), png.begin() + 8), "magic_only.png"),
                 fs::path("magic_only.png"), "PNG");

  // Truncated anywhere: an error, never a crash or a half-grey image.
  for (size_t cut : {size_t{20}, jpeg.size() / 3, jpeg.size() / 2, jpeg.size() - 3}) {
    const std::vector<uint8_t> t(jpeg.begin(), jpeg.begin() + cut);
    SCOPED_TRACE(cut);
    EXPECT_MESSAGE(decode_bytes_error(t, "cut.jpg"), fs::path("cut.jpg"), "JPEG");
  }
  for (size_t cut : {size_t{20}, size_t{40}, png.size() / 2, png.size() - 13}) {
    const std::vector<uint8_t> t(png.begin(), png.begin() + cut);
    SCOPED_TRACE(cut);
    EXPECT_MESSAGE(decode_bytes_error(t, "cut.png"), fs::path("cut.png"), "PNG");
  }

  // Corrupt: a PNG whose pixel data fails its CRC; a JPEG whose frame header says 0 rows.
  std::vector<uint8_t> bad_png = png;
  bad_png[png.size() / 2] ^= 0x5A;
  EXPECT_MESSAGE(decode_bytes_error(bad_png, "bad.png"), fs::path("bad.png"), "PNG");
  std::vector<uint8_t> bad_jpeg = jpeg;
  for (size_t i = 2; i + 8 < bad_jpeg.size(); ++i)
    if (bad_jpeg[i] == 0xFF && bad_jpeg[i + 1] == 0xC0) {  // SOF0: length, precision, height
      bad_jpeg[i + 5] = bad_jpeg[i + 6] = 0;
      break;
    }
  EXPECT_MESSAGE(decode_bytes_error(bad_jpeg, "bad.jpg"), fs::path("bad.jpg"), "JPEG");
  // Scrambled entropy-coded data: an error or a picture, but no crash.
  std::vector<uint8_t> noisy = jpeg;
  for (size_t i = noisy.size() / 2; i < noisy.size() - 2; i += 5) noisy[i] = static_cast<uint8_t>(i * 31);
  try {
    decode_image(noisy, "noisy.jpg");
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("noisy.jpg"), std::string::npos);
  }

  // Too large, refused from the header before any allocation.
  std::vector<uint8_t> huge = png;
  huge[16] = 0, huge[17] = 1, huge[18] = 0x11, huge[19] = 0x70;  // width 70000
  EXPECT_MESSAGE(decode_bytes_error(huge, "huge.png"), fs::path("huge.png"), "too large");
  huge = png;
  huge[16] = 0, huge[17] = 0, huge[18] = 0xFF, huge[19] = 0xFF;  // 65535 x 65535
  huge[20] = 0, huge[21] = 0, huge[22] = 0xFF, huge[23] = 0xFF;
  EXPECT_MESSAGE(decode_bytes_error(huge, "huge.png"), fs::path("huge.png"), "too large");
}

TEST(ImageDecode, ChannelsAndSizes) {
  TempDir dir;
  const int64_t w = 5, h = 4;
  std::vector<uint8_t> px;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) px.insert(px.end(), {uint8_t(10 * x), uint8_t(50 * y), uint8_t(200 + x + y)});
  write_file(dir / "rgb.png", encode_png(px.data(), w, h, 3));
  const Tensor t = load_image_file(dir / "rgb.png", 3, h, w);
  ASSERT_EQ(t.shape(), (Shape{3, h, w}));
  EXPECT_EQ(t.dtype(), DType::u8);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      EXPECT_EQ(at(t, 0, y, x), 10 * x);
      EXPECT_EQ(at(t, 1, y, x), 50 * y);
      EXPECT_EQ(at(t, 2, y, x), 200 + x + y);
    }
  // To gray: OpenCV's fixed-point BT.601 luma, exactly.
  const Tensor g = load_image_file(dir / "rgb.png", 1, h, w);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      EXPECT_EQ(at(g, 0, y, x), (10 * x * 4899 + 50 * y * 9617 + (200 + x + y) * 1868 + 8192) >> 14);

  // Gray to RGB repeats.
  write_file(dir / "gray.png", encode_png(std::vector<uint8_t>{0, 100, 255, 7, 8, 9}.data(), 3, 2, 1));
  const Tensor rgb = load_image_file(dir / "gray.png", 3, 2, 3);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(at(rgb, c, 0, 1), 100);

  // Halving a ramp (PIL's antialiased bilinear): inside, each output is the ramp at the
  // output pixel's centre; at the edges the filter is renormalized.
  std::vector<uint8_t> ramp(64);
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 8; ++x) ramp[y * 8 + x] = static_cast<uint8_t>(10 * x + 20 * y);
  write_file(dir / "ramp.png", encode_png(ramp.data(), 8, 8, 1));
  const Tensor small = load_image_file(dir / "ramp.png", 1, 4, 4);
  for (int y = 1; y < 3; ++y)
    for (int x = 1; x < 3; ++x) EXPECT_NEAR(at(small, 0, y, x), 10 * (2 * x + 0.5) + 20 * (2 * y + 0.5), 1);
  // Enlarging a constant image keeps it constant; odd sizes are fine.
  write_file(dir / "flat.png", encode_png(std::vector<uint8_t>(18, 77).data(), 3, 2, 3));
  const Tensor big = load_image_file(dir / "flat.png", 3, 7, 11);
  ASSERT_EQ(big.shape(), (Shape{3, 7, 11}));
  for (int64_t i = 0; i < big.numel(); ++i) ASSERT_EQ(big.data<uint8_t>()[i], 77);
}

TEST(ImageDecode, BadFilesRejected) {
  TempDir dir;
  std::ofstream(dir / "notes.png") << "this is a text file, not a picture\n";
  auto error = [](const fs::path& path, int64_t channels = 3, int64_t h = 4, int64_t w = 4) {
    return input_error_of([&] { load_image_file(path, channels, h, w); }, "load_image_file(" + path.string() + ")");
  };
  EXPECT_MESSAGE(error(dir / "notes.png"), dir / "notes.png", "not a JPEG or PNG image");
  EXPECT_MESSAGE(error(dir / "missing.png"), dir / "missing.png", "no such file");
  write_file(dir / "empty.png", {});
  EXPECT_MESSAGE(error(dir / "empty.png"), dir / "empty.png", "empty file");
  auto png = encode_png(picture(32, 32, 3).data(), 32, 32, 3);
  png.resize(png.size() / 3);
  write_file(dir / "cut.png", png);
  EXPECT_MESSAGE(error(dir / "cut.png"), dir / "cut.png", "PNG");

}

namespace convoy {
namespace {

// A photo-like picture with detail everywhere: (h, w, channels) u8.
std::vector<uint8_t> photo(int64_t w, int64_t h, int64_t channels) {
  std::vector<uint8_t> px(static_cast<size_t>(w * h * channels));
  uint32_t s = 7;
  for (int64_t i = 0; i < w * h * channels; ++i) {
    s = s * 1664525u + 1013904223u;
    const int64_t x = (i / channels) % w, y = (i / channels) / w, c = i % channels;
    px[static_cast<size_t>(i)] =
        static_cast<uint8_t>((x * 3 + y * 5 + c * 70 + static_cast<int64_t>(s >> 28) * 4 + ((x / 7 + y / 5) % 2) * 60) & 255);
  }
  return px;
}

// The window decode equals the full decode cut to the same rectangle, within 1 per sample.
void expect_region_matches_full(const std::vector<uint8_t>& jpeg, const ScaleHint* hint, double x, double y,
                                double w, double h, int64_t margin) {
  SCOPED_TRACE("window " + std::to_string(x) + "," + std::to_string(y) + " " + std::to_string(w) + "x" +
               std::to_string(h) + (hint ? " scaled" : ""));
  const DecodedImage full = decode_jpeg(jpeg, "full.jpg", hint);
  const JpegRegion r = decode_jpeg_region(jpeg, "region.jpg", hint, x, y, w, h, margin);
  EXPECT_EQ(r.full_width, full.width);
  EXPECT_EQ(r.full_height, full.height);
  EXPECT_EQ(r.scale, full.scale);
  EXPECT_EQ(r.channels, full.channels);
  // It holds the asked window plus the margin, clamped to the image.
  EXPECT_LE(r.x, std::max<int64_t>(0, static_cast<int64_t>(std::floor(x * r.scale)) - margin));
  EXPECT_LE(r.y, std::max<int64_t>(0, static_cast<int64_t>(std::floor(y * r.scale)) - margin));
  EXPECT_GE(r.x + r.width, std::min<int64_t>(full.width, static_cast<int64_t>(std::ceil((x + w) * r.scale)) + margin));
  EXPECT_GE(r.y + r.height, std::min<int64_t>(full.height, static_cast<int64_t>(std::ceil((y + h) * r.scale)) + margin));
  ASSERT_LE(r.x + r.width, full.width);
  ASSERT_LE(r.y + r.height, full.height);
  int worst = 0;
  for (int64_t yy = 0; yy < r.height; ++yy)
    for (int64_t xx = 0; xx < r.width; ++xx)
      for (int64_t c = 0; c < full.channels; ++c) {
        const int a = r.pixels[yy * r.stride + xx * r.pixel_bytes + c];
        const int b = full.pixels[static_cast<size_t>(((r.y + yy) * full.width + r.x + xx) * full.channels + c)];
        worst = std::max(worst, std::abs(a - b));
      }
  EXPECT_LE(worst, 1);
}

TEST(ImageDecode, JpegWindowEqualsTheFullDecodeCut) {
  // Colour in each chroma subsampling (MCUs of 16x16, 16x8 and 8x8 pixels), and gray.
  const std::pair<int64_t, ChromaSubsampling> kinds[] = {{3, ChromaSubsampling::s420},
                                                         {3, ChromaSubsampling::s422},
                                                         {3, ChromaSubsampling::s444},
                                                         {1, ChromaSubsampling::s420}};
  for (const auto& [channels, chroma] : kinds) {
    // Odd sizes: neither side a multiple of the MCU.
    const int64_t w = 203, h = 157;
    const std::vector<uint8_t> jpeg = encode_jpeg(photo(w, h, channels).data(), w, h, channels, 92, chroma);
    SCOPED_TRACE(std::to_string(channels) + " channels, chroma " + std::to_string(static_cast<int>(chroma)));
    expect_region_matches_full(jpeg, nullptr, 37.0, 21.0, 90.0, 70.0, 3);      // inside, unaligned
    expect_region_matches_full(jpeg, nullptr, 0.0, 0.0, 40.0, 30.0, 3);        // top-left corner
    expect_region_matches_full(jpeg, nullptr, 150.0, 120.0, 53.0, 37.0, 3);    // bottom-right corner
    expect_region_matches_full(jpeg, nullptr, 17.0, 33.0, 1.0, 1.0, 2);        // one pixel
    expect_region_matches_full(jpeg, nullptr, 0.0, 0.0, 203.0, 157.0, 3);      // all of it
    expect_region_matches_full(jpeg, nullptr, 101.0, 0.0, 60.0, 157.0, 2);     // a column strip
    // DCT-scaled decodes: 1/2 and 1/4.
    const ScaleHint half{180.0, 140.0, 80, 60}, quarter{200.0, 150.0, 40, 30};
    expect_region_matches_full(jpeg, &half, 20.0, 10.0, 180.0, 140.0, 3);
    expect_region_matches_full(jpeg, &quarter, 3.0, 7.0, 200.0, 150.0, 3);
    expect_region_matches_full(jpeg, &half, 63.0, 45.0, 100.0, 90.0, 3);
  }
}

TEST(ImageDecode, JpegWindowRefusesTruncatedFiles) {
  const int64_t w = 160, h = 120;
  const std::vector<uint8_t> jpeg = encode_jpeg(photo(w, h, 3).data(), w, h, 3, 90);
  // A window at the top: the missing rows lie below it and are never decoded.
  for (size_t cut : {size_t{20}, jpeg.size() / 2, jpeg.size() - 3, jpeg.size() - 1}) {
    const std::vector<uint8_t> t(jpeg.begin(), jpeg.begin() + cut);
    SCOPED_TRACE(cut);
    for (double y : {0.0, 80.0})
      EXPECT_THROW(decode_jpeg_region(t, "cut.jpg", nullptr, 10.0, y, 30.0, 20.0, 2), InputError);
  }
  EXPECT_NO_THROW(decode_jpeg_region(jpeg, "whole.jpg", nullptr, 10.0, 0.0, 30.0, 20.0, 2));
}

}  // namespace
}  // namespace convoy
