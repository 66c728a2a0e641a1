// Preprocessing (datasets/preprocess.h, datasets/resample.h): the resampler against a float64
// PIL reference, OpenCV's luma, and the crop boxes against torchvision's arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "datasets/image_codec.h"
#include "datasets/preprocess.h"
#include "datasets/resample.h"
#include "engine/core/error.h"

using namespace convoy;

namespace {

// PIL's BILINEAR resize of `box` in float64 with no intermediate rounding: per output
// sample, a triangle of half-width max(scale, 1) around the output pixel's centre mapped into
// the box, over every source pixel, normalized. planar (C, H, W) in and out.
std::vector<uint8_t> reference_resample(const std::vector<uint8_t>& src, int64_t channels, int64_t width,
                                        int64_t height, const CropBox& box, int64_t out_w, int64_t out_h) {
  auto weights = [](int64_t in_size, double in0, double in_len, int64_t out_size) {
    const double scale = in_len / static_cast<double>(out_size);
    const double fs = std::max(scale, 1.0);
    std::vector<std::vector<double>> w(out_size, std::vector<double>(in_size, 0.0));
    for (int64_t o = 0; o < out_size; ++o) {
      const double center = in0 + (o + 0.5) * scale;
      double sum = 0;
      for (int64_t i = 0; i < in_size; ++i) {
        const double t = std::fabs((i + 0.5 - center) / fs);
        w[o][i] = t < 1 ? 1 - t : 0;
        sum += w[o][i];
      }
      for (double& v : w[o]) v /= sum;
    }
    return w;
  };
  const auto wx = weights(width, box.x, box.width, out_w);
  const auto wy = weights(height, box.y, box.height, out_h);
  std::vector<uint8_t> out(static_cast<size_t>(channels * out_h * out_w));
  std::vector<double> rows(static_cast<size_t>(height * out_w));
  for (int64_t c = 0; c < channels; ++c) {
    const uint8_t* s = src.data() + c * width * height;
    for (int64_t y = 0; y < height; ++y)
      for (int64_t x = 0; x < out_w; ++x) {
        double acc = 0;
        for (int64_t i = 0; i < width; ++i) acc += wx[x][i] * s[y * width + i];
        rows[y * out_w + x] = acc;
      }
    for (int64_t y = 0; y < out_h; ++y)
      for (int64_t x = 0; x < out_w; ++x) {
        double acc = 0;
        for (int64_t i = 0; i < height; ++i) acc += wy[y][i] * rows[i * out_w + x];
        out[(c * out_h + y) * out_w + x] = static_cast<uint8_t>(std::clamp(std::lround(acc), 0L, 255L));
      }
  }
  return out;
}

// Texture with edges and noise: (C, H, W) u8.
std::vector<uint8_t> texture(int64_t channels, int64_t width, int64_t height) {
  std::vector<uint8_t> v(static_cast<size_t>(channels * width * height));
  uint32_t s = 12345;
  for (size_t i = 0; i < v.size(); ++i) {
    s = s * 1664525u + 1013904223u;
    const int64_t x = static_cast<int64_t>(i) % width, y = (static_cast<int64_t>(i) / width) % height;
    const int base = ((x / 5 + y / 3) % 2) ? 200 : 40;
    v[i] = static_cast<uint8_t>(std::clamp(base + static_cast<int>(s >> 27) - 16 + static_cast<int>(x % 17), 0, 255));
  }
  return v;
}

std::vector<uint8_t> to_interleaved(const std::vector<uint8_t>& chw, int64_t c, int64_t plane) {
  std::vector<uint8_t> out(chw.size());
  for (int64_t p = 0; p < plane; ++p)
    for (int64_t k = 0; k < c; ++k) out[p * c + k] = chw[k * plane + p];
  return out;
}

int max_abs_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  int m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(int(a[i]) - int(b[i])));
  return m;
}

Preprocess make(int64_t channels, int64_t height, int64_t width, int64_t resize = 0, bool rrc = false) {
  Preprocess p;
  p.channels = channels;
  p.height = height;
  p.width = width;
  p.resize = resize;
  p.random_resized_crop = rrc;
  return p;
}

}  // namespace

TEST(Resample, MatchesFloat64PilBilinear) {
  const int64_t w = 61, h = 47;
  const std::vector<uint8_t> src = texture(3, w, h);
  const std::vector<uint8_t> src_hwc = to_interleaved(src, 3, w * h);
  struct Case {
    CropBox box;
    int64_t out_w, out_h;
  };
  const Case cases[] = {
      {{0, 0, 61, 47}, 20, 15},          // shrink ~3x (antialiased)
      {{0, 0, 61, 47}, 150, 101},        // enlarge
      {{0, 0, 61, 47}, 30, 90},          // shrink one way, enlarge the other
      {{7.3, 4.6, 40.25, 31.5}, 17, 23}, // fractional box
      {{3, 2, 50, 40}, 50, 40},          // a crop at its own size
      {{0.5, 0.5, 60, 46}, 7, 5},        // strong shrink
      {{59.5, 1, 1.5, 45}, 4, 9},        // a box at the right edge
  };
  for (const Case& c : cases) {
    const std::vector<uint8_t> want = reference_resample(src, 3, w, h, c.box, c.out_w, c.out_h);
    std::vector<uint8_t> planar(want.size()), from_hwc(want.size()), hwc(want.size());
    resample_bilinear(src.data(), w, h, 3, PixelLayout::planar, c.box, c.out_w, c.out_h, planar.data(),
                      PixelLayout::planar);
    resample_bilinear(src_hwc.data(), w, h, 3, PixelLayout::interleaved, c.box, c.out_w, c.out_h,
                      from_hwc.data(), PixelLayout::planar);
    resample_bilinear(src_hwc.data(), w, h, 3, PixelLayout::interleaved, c.box, c.out_w, c.out_h, hwc.data(),
                      PixelLayout::interleaved);
    const std::string what = std::to_string(c.out_w) + "x" + std::to_string(c.out_h) + " from box x=" +
                             std::to_string(c.box.x) + " w=" + std::to_string(c.box.width);
    EXPECT_LE(max_abs_diff(planar, want), 1) << what;
    EXPECT_EQ(from_hwc, planar) << what;
    EXPECT_EQ(hwc, to_interleaved(planar, 3, c.out_w * c.out_h)) << what;
  }
}

TEST(Resample, IdentityIsAnExactCopy) {
  const std::vector<uint8_t> src = texture(3, 33, 21);
  std::vector<uint8_t> out(src.size());
  resample_bilinear(src.data(), 33, 21, 3, PixelLayout::planar, {0, 0, 33, 21}, 33, 21, out.data(),
                    PixelLayout::planar);
  EXPECT_EQ(out, src);
  std::fill(out.begin(), out.end(), 0);
  preprocess_pixels(src.data(), 3, 21, 33, make(3, 21, 33), SampleMode::eval, 0, out.data());
  EXPECT_EQ(out, src);
  // A PNG at the output size, decoded and preprocessed: its pixels, planar.
  const std::vector<uint8_t> hwc = to_interleaved(src, 3, 33 * 21);
  std::fill(out.begin(), out.end(), 0);
  decode_preprocess(encode_png(hwc.data(), 33, 21, 3), "x.png", make(3, 21, 33), SampleMode::eval, 0, out.data());
  EXPECT_EQ(out, src);
}

TEST(Resample, ColourConversionAsOpenCv) {
  // Every (R, G, B) on a coarse grid, including the extremes.
  std::vector<uint8_t> r, g, b;
  for (int i = 0; i < 256; i += 15)
    for (int j = 0; j < 256; j += 17)
      for (int k : {0, 1, 127, 128, 254, 255}) r.push_back(i), g.push_back(j), b.push_back(k);
  r.push_back(255), g.push_back(255), b.push_back(255);
  const int64_t n = static_cast<int64_t>(r.size());
  std::vector<uint8_t> gray(n);
  rgb_to_gray(r.data(), g.data(), b.data(), 1, n, gray.data());
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(gray[i], (r[i] * 4899 + g[i] * 9617 + b[i] * 1868 + 8192) >> 14) << i;
    ASSERT_LE(std::fabs(gray[i] - (0.299 * r[i] + 0.587 * g[i] + 0.114 * b[i])), 0.51) << i;
  }
  EXPECT_EQ(gray.back(), 255);

  // Through preprocess_pixels: planar RGB to gray, gray to RGB (repeated), RGBA to RGB.
  std::vector<uint8_t> chw;
  chw.insert(chw.end(), r.begin(), r.end());
  chw.insert(chw.end(), g.begin(), g.end());
  chw.insert(chw.end(), b.begin(), b.end());
  std::vector<uint8_t> out(n);
  preprocess_pixels(chw.data(), 3, 1, n, make(1, 1, n), SampleMode::eval, 0, out.data());
  EXPECT_EQ(out, gray);
  std::vector<uint8_t> rgb(3 * n);
  preprocess_pixels(gray.data(), 1, 1, n, make(3, 1, n), SampleMode::eval, 0, rgb.data());
  for (int c = 0; c < 3; ++c) EXPECT_TRUE(std::equal(gray.begin(), gray.end(), rgb.begin() + c * n));
  std::vector<uint8_t> rgba = chw;
  rgba.insert(rgba.end(), n, 9);
  preprocess_pixels(rgba.data(), 4, 1, n, make(3, 1, n), SampleMode::eval, 0, rgb.data());
  EXPECT_EQ(rgb, chw);
}

TEST(CropBox, CenterCropMatchesTorchvision) {
  // 500x375, Resize(256) -> 341x256 (int(256 * 500 / 375) = 341), CenterCrop(224):
  // top = round(16.0) = 16, left = round(58.5) = 58 (half to even).
  CropBox b = center_crop_box(500, 375, make(3, 224, 224, 256));
  EXPECT_DOUBLE_EQ(b.x, 58 * 500.0 / 341);
  EXPECT_DOUBLE_EQ(b.y, 16 * 375.0 / 256);
  EXPECT_DOUBLE_EQ(b.width, 224 * 500.0 / 341);
  EXPECT_DOUBLE_EQ(b.height, 224 * 375.0 / 256);
  // Portrait 375x500 -> 256x341: left 16, top 58.
  b = center_crop_box(375, 500, make(3, 224, 224, 256));
  EXPECT_DOUBLE_EQ(b.x, 16 * 375.0 / 256);
  EXPECT_DOUBLE_EQ(b.y, 58 * 500.0 / 341);
  EXPECT_DOUBLE_EQ(b.width, 224 * 375.0 / 256);
  EXPECT_DOUBLE_EQ(b.height, 224 * 500.0 / 341);
  // 300x200, Resize(100) -> 150x100, CenterCrop(80 high, 90 wide): top 10, left 30; x2.
  b = center_crop_box(300, 200, make(3, 80, 90, 100));
  EXPECT_DOUBLE_EQ(b.x, 60);
  EXPECT_DOUBLE_EQ(b.y, 20);
  EXPECT_DOUBLE_EQ(b.width, 180);
  EXPECT_DOUBLE_EQ(b.height, 160);
  // resize 0: the whole image.
  b = center_crop_box(300, 200, make(3, 80, 90, 0));
  EXPECT_EQ(b.x, 0);
  EXPECT_EQ(b.y, 0);
  EXPECT_EQ(b.width, 300);
  EXPECT_EQ(b.height, 200);
  // Eval ignores the random crop; train without it is the centre box too.
  Preprocess p = make(3, 224, 224, 256, true);
  const CropBox e = sample_box(500, 375, p, SampleMode::eval, 7);
  EXPECT_DOUBLE_EQ(e.x, 58 * 500.0 / 341);
  p.random_resized_crop = false;
  EXPECT_DOUBLE_EQ(sample_box(500, 375, p, SampleMode::train, 7).x, e.x);
}

TEST(CropBox, RandomResizedCropIsTorchvisionsGetParams) {
  const Preprocess p = make(3, 224, 224, 0, true);
  const int64_t W = 500, H = 375;
  double area_sum = 0;
  int fallbacks = 0;
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    const CropBox b = random_resized_crop_box(W, H, p, seed);
    const CropBox again = random_resized_crop_box(W, H, p, seed);
    ASSERT_EQ(std::memcmp(&b, &again, sizeof b), 0) << "seed " << seed;
    // Whole pixels, inside the image.
    ASSERT_EQ(b.x, std::floor(b.x));
    ASSERT_EQ(b.width, std::floor(b.width));
    ASSERT_GE(b.x, 0);
    ASSERT_GE(b.y, 0);
    ASSERT_GT(b.width, 0);
    ASSERT_GT(b.height, 0);
    ASSERT_LE(b.x + b.width, W);
    ASSERT_LE(b.y + b.height, H);
    const double fraction = b.width * b.height / (W * H);
    area_sum += fraction;
    if (b.width == W && b.height == H) {
      ++fallbacks;
      continue;
    }
    // An accepted try: area and ratio within the ranges, up to rounding w and h.
    const double wlo = b.width - 0.5, whi = b.width + 0.5, hlo = b.height - 0.5, hhi = b.height + 0.5;
    EXPECT_LE(wlo * hlo / (W * H), p.scale_max + 1e-9) << seed;
    EXPECT_GE(whi * hhi / (W * H), p.scale_min - 1e-9) << seed;
    EXPECT_LE(wlo / hhi, p.ratio_max + 1e-9) << seed;
    EXPECT_GE(whi / hlo, p.ratio_min - 1e-9) << seed;
  }
  // torchvision's get_params, simulated in Python over 200,000 draws: mean area fraction
  // 0.433 for 500x375 (the tries for large areas often fail and are drawn again), no fallback.
  EXPECT_NEAR(area_sum / 2000, 0.433, 0.03);
  EXPECT_LT(fallbacks, 5);
  // Seeds differ.
  const CropBox a = random_resized_crop_box(W, H, p, 1), b = random_resized_crop_box(W, H, p, 2);
  EXPECT_NE(std::memcmp(&a, &b, sizeof a), 0);

  // Fallback: no try fits a 1000x10 strip at ratio [3/4, 4/3]; the centre, clamped to 4/3.
  const CropBox f = random_resized_crop_box(1000, 10, p, 3);
  EXPECT_EQ(f.height, 10);
  EXPECT_EQ(f.width, 13);  // round(10 * 4/3)
  EXPECT_EQ(f.x, (1000 - 13) / 2);
  EXPECT_EQ(f.y, 0);
  // scale (1, 1), ratio (1, 1) on a square: the whole image.
  Preprocess whole = p;
  whole.scale_min = whole.scale_max = 1;
  whole.ratio_min = whole.ratio_max = 1;
  const CropBox s = random_resized_crop_box(64, 64, whole, 9);
  EXPECT_EQ(s.width, 64);
  EXPECT_EQ(s.height, 64);
}

TEST(Preprocess, TrainAndEvalFromAJpeg) {
  std::vector<uint8_t> hwc(375 * 500 * 3);
  for (size_t i = 0; i < hwc.size(); ++i) hwc[i] = static_cast<uint8_t>((i / 3 % 500) / 2 + (i % 3) * 40);
  const std::vector<uint8_t> jpeg = encode_jpeg(hwc.data(), 500, 375, 3, 90);
  std::vector<uint8_t> a(3 * 224 * 224), b(3 * 224 * 224);
  Preprocess p = make(3, 224, 224, 256, true);
  decode_preprocess(jpeg, "x.jpg", p, SampleMode::train, 11, a.data());
  decode_preprocess(jpeg, "x.jpg", p, SampleMode::train, 11, b.data());
  EXPECT_EQ(a, b);  // a pure function of the seed
  decode_preprocess(jpeg, "x.jpg", p, SampleMode::train, 12, b.data());
  EXPECT_NE(a, b);
  decode_preprocess(jpeg, "x.jpg", p, SampleMode::eval, 11, a.data());
  decode_preprocess(jpeg, "x.jpg", p, SampleMode::eval, 12, b.data());
  EXPECT_EQ(a, b);  // eval does not depend on it

  Preprocess gray = make(1, 28, 28, 32);
  std::vector<uint8_t> g(28 * 28);
  decode_preprocess(jpeg, "x.jpg", gray, SampleMode::eval, 0, g.data());
  EXPECT_THROW(decode_preprocess(jpeg, "x.jpg", make(2, 28, 28), SampleMode::eval, 0, g.data()), InputError);
}

TEST(Preprocess, ImageFileNames) {
  EXPECT_TRUE(is_image_file_name("a.jpg"));
  EXPECT_TRUE(is_image_file_name("dir/B.JPEG"));
  EXPECT_TRUE(is_image_file_name("x.Png"));
  EXPECT_FALSE(is_image_file_name("x.gif"));
  EXPECT_FALSE(is_image_file_name("jpg"));
  EXPECT_FALSE(is_image_file_name("x.jpg.txt"));
  EXPECT_FALSE(is_image_file_name(""));
}
