// The crop boxes of torchvision's RandomResizedCrop and Resize + CenterCrop, and the
// decode-crop-resize path from an encoded file or planar pixels to a model input.
#include "datasets/preprocess.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <vector>

#include "datasets/image_codec.h"
#include "datasets/resample.h"
#include "engine/core/counter_rng.h"
#include "engine/core/error.h"

namespace convoy {
namespace {

void check_preprocess(const Preprocess& p) {
  if (p.channels != 1 && p.channels != 3)
    throw InputError("preprocess: channels " + std::to_string(p.channels) + ", expected 1 or 3");
  if (p.height < 1 || p.width < 1 || p.height > kMaxImageSide || p.width > kMaxImageSide)
    throw InputError("preprocess: output size " + std::to_string(p.height) + "x" + std::to_string(p.width) +
                     ", expected 1 to " + std::to_string(kMaxImageSide) + " per side");
  if (p.resize < 0 || p.resize > kMaxImageSide)
    throw InputError("preprocess: resize " + std::to_string(p.resize) + ", expected 0 to " +
                     std::to_string(kMaxImageSide));
  if (p.random_resized_crop && !(p.scale_min > 0 && p.scale_min <= p.scale_max && p.ratio_min > 0 &&
                                 p.ratio_min <= p.ratio_max))
    throw InputError("preprocess: random_resized_crop needs 0 < scale_min <= scale_max and 0 < ratio_min <= ratio_max");
}

// Python's round(): halves to even, as std::nearbyint in the default rounding mode.
int64_t py_round(double v) { return static_cast<int64_t>(std::nearbyint(v)); }

bool whole_image(const CropBox& b, int64_t width, int64_t height) {
  return b.x == 0 && b.y == 0 && b.width == static_cast<double>(width) && b.height == static_cast<double>(height);
}

// An (height, width, channels) u8 image, cropped to `box`, resized and converted to
// p.channels into `out`, (p.channels, p.height, p.width) u8.
void finish_interleaved(const uint8_t* hwc, int64_t channels, int64_t height, int64_t width, const CropBox& box,
                        const Preprocess& p, uint8_t* out) {
  const int64_t plane = p.height * p.width;
  if (channels >= 3 && p.channels == 1) {
    // To gray first: one channel to resample instead of three.
    std::vector<uint8_t> gray(static_cast<size_t>(height * width));  // (H, W) u8
    rgb_to_gray(hwc, hwc + 1, hwc + 2, channels, height * width, gray.data());
    resample_bilinear(gray.data(), width, height, 1, PixelLayout::interleaved, box, p.width, p.height, out,
                      PixelLayout::planar);
    return;
  }
  if (channels == 3 && p.channels == 3) {
    resample_bilinear(hwc, width, height, 3, PixelLayout::interleaved, box, p.width, p.height, out,
                      PixelLayout::planar);
    return;
  }
  CONVOY_CHECK(channels == 1, "preprocess: decoded images have 1 or 3 channels");
  resample_bilinear(hwc, width, height, 1, PixelLayout::interleaved, box, p.width, p.height, out, PixelLayout::planar);
  for (int64_t c = 1; c < p.channels; ++c) std::memcpy(out + c * plane, out, static_cast<size_t>(plane));
}

}  // namespace

CropBox random_resized_crop_box(int64_t src_width, int64_t src_height, const Preprocess& p, uint64_t seed) {
  const double area = static_cast<double>(src_width) * static_cast<double>(src_height);
  const double log_ratio_min = std::log(p.ratio_min), log_ratio_max = std::log(p.ratio_max);
  uint64_t counter = 0;
  // torch.empty(1).uniform_(a, b)
  auto uniform = [&](double a, double b) { return a + (b - a) * static_cast<double>(counter_uniform(seed, counter++)); };
  // torch.randint(0, n, (1,))
  auto randint = [&](int64_t n) {
    return std::min<int64_t>(static_cast<int64_t>(static_cast<double>(counter_uniform(seed, counter++)) * n), n - 1);
  };
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * uniform(p.scale_min, p.scale_max);
    const double aspect = std::exp(uniform(log_ratio_min, log_ratio_max));
    const int64_t w = py_round(std::sqrt(target_area * aspect));
    const int64_t h = py_round(std::sqrt(target_area / aspect));
    if (0 < w && w <= src_width && 0 < h && h <= src_height) {
      const int64_t i = randint(src_height - h + 1);
      const int64_t j = randint(src_width - w + 1);
      return {static_cast<double>(j), static_cast<double>(i), static_cast<double>(w), static_cast<double>(h)};
    }
  }
  // Fallback: the whole image, cut to the nearest end of the ratio range, centred.
  const double in_ratio = static_cast<double>(src_width) / static_cast<double>(src_height);
  int64_t w = src_width, h = src_height;
  if (in_ratio < p.ratio_min) {
    h = py_round(static_cast<double>(w) / p.ratio_min);
  } else if (in_ratio > p.ratio_max) {
    w = py_round(static_cast<double>(h) * p.ratio_max);
  }
  const int64_t i = (src_height - h) / 2, j = (src_width - w) / 2;
  return {static_cast<double>(j), static_cast<double>(i), static_cast<double>(w), static_cast<double>(h)};
}

CropBox center_crop_box(int64_t src_width, int64_t src_height, const Preprocess& p) {
  if (p.resize == 0) return {0, 0, static_cast<double>(src_width), static_cast<double>(src_height)};
  // torchvision's _compute_resized_output_size: the shorter side to `resize`, the longer
  // int(resize * long / short) (truncated, in float64).
  int64_t new_w, new_h;
  if (src_width <= src_height) {
    new_w = p.resize;
    new_h = static_cast<int64_t>(static_cast<double>(p.resize) * static_cast<double>(src_height) / static_cast<double>(src_width));
  } else {
    new_h = p.resize;
    new_w = static_cast<int64_t>(static_cast<double>(p.resize) * static_cast<double>(src_width) / static_cast<double>(src_height));
  }
  // CenterCrop: int(round((size - crop) / 2.0)). A crop larger than the resized image
  // reaches past its edges, where the resampler repeats the edge (torchvision pads zeros).
  const int64_t top = py_round(static_cast<double>(new_h - p.height) / 2.0);
  const int64_t left = py_round(static_cast<double>(new_w - p.width) / 2.0);
  const double sx = static_cast<double>(src_width) / static_cast<double>(new_w);
  const double sy = static_cast<double>(src_height) / static_cast<double>(new_h);
  return {static_cast<double>(left) * sx, static_cast<double>(top) * sy, static_cast<double>(p.width) * sx,
          static_cast<double>(p.height) * sy};
}

CropBox sample_box(int64_t src_width, int64_t src_height, const Preprocess& p, SampleMode mode, uint64_t seed) {
  if (mode == SampleMode::train && p.random_resized_crop)
    return random_resized_crop_box(src_width, src_height, p, seed);
  return center_crop_box(src_width, src_height, p);
}

void preprocess_pixels(const uint8_t* chw, int64_t channels, int64_t height, int64_t width, const Preprocess& p,
                       SampleMode mode, uint64_t seed, uint8_t* out) {
  check_preprocess(p);
  if (channels < 1 || channels > 4 || height < 1 || width < 1)
    throw InputError("preprocess: pixels of " + std::to_string(channels) + "x" + std::to_string(height) + "x" +
                     std::to_string(width) + ", expected 1 to 4 channels and a non-empty image");
  const CropBox box = sample_box(width, height, p, mode, seed);
  const int64_t src_plane = height * width, plane = p.height * p.width;
  const bool color = channels >= 3;  // a second or fourth channel is alpha, dropped
  const bool identity = whole_image(box, width, height) && width == p.width && height == p.height;
  std::vector<uint8_t> gray;  // (H, W) u8
  const uint8_t* src = chw;
  int64_t planes = p.channels;
  if (p.channels == 1 && color) {
    gray.resize(static_cast<size_t>(src_plane));
    rgb_to_gray(chw, chw + src_plane, chw + 2 * src_plane, 1, src_plane, gray.data());
    src = gray.data();
  } else if (!color) {
    planes = 1;  // gray to colour: resample once, then repeat
  }
  if (identity) {
    std::memcpy(out, src, static_cast<size_t>(planes * plane));
  } else {
    resample_bilinear(src, width, height, planes, PixelLayout::planar, box, p.width, p.height, out,
                      PixelLayout::planar);
  }
  for (int64_t c = planes; c < p.channels; ++c) std::memcpy(out + c * plane, out, static_cast<size_t>(plane));
}

void decode_preprocess(std::span<const uint8_t> bytes, std::string_view name, const Preprocess& p,
                       SampleMode mode, uint64_t seed, uint8_t* out) {
  check_preprocess(p);
  const ImageHeader header = read_image_header(bytes, name);
  CropBox box = sample_box(header.width, header.height, p, mode, seed);
  const ScaleHint hint{box.width, box.height, p.width, p.height};
  if (header.format == ImageFormat::jpeg) {
    // Only the box, plus the filter's reach around it (the support of the antialiasing
    // triangle, at most box/out decoded pixels, and one for rounding), so that the resampler
    // sees every pixel it would weigh in the full image.
    const int64_t margin =
        static_cast<int64_t>(std::ceil(std::max({box.width / static_cast<double>(p.width),
                                                 box.height / static_cast<double>(p.height), 1.0}))) + 2;
    const JpegRegion r = decode_jpeg_region(bytes, name, &hint, box.x, box.y, box.width, box.height, margin);
    const CropBox rbox{box.x * r.scale - static_cast<double>(r.x), box.y * r.scale - static_cast<double>(r.y),
                       box.width * r.scale, box.height * r.scale};
    const int64_t plane = p.height * p.width;
    if (r.channels == 3 && p.channels == 3) {
      resample_rgbx_to_planar(r.pixels, r.width, r.height, r.stride, rbox, p.width, p.height, out);
      return;
    }
    if (r.channels == 3) {  // to gray first, then one channel to resample
      thread_local std::vector<uint8_t> gray;
      if (gray.size() < static_cast<size_t>(r.width * r.height)) gray.resize(static_cast<size_t>(r.width * r.height));
      for (int64_t yy = 0; yy < r.height; ++yy) {
        const uint8_t* row = r.pixels + yy * r.stride;
        rgb_to_gray(row, row + 1, row + 2, 4, r.width, gray.data() + yy * r.width);
      }
      resample_bilinear(gray.data(), r.width, r.height, 1, PixelLayout::interleaved, rbox, p.width, p.height, out,
                        PixelLayout::planar);
      return;
    }
    if (r.stride != r.width) {  // gray rows are packed already; this is for safety
      thread_local std::vector<uint8_t> packed;
      if (packed.size() < static_cast<size_t>(r.width * r.height)) packed.resize(static_cast<size_t>(r.width * r.height));
      for (int64_t yy = 0; yy < r.height; ++yy)
        std::memcpy(packed.data() + yy * r.width, r.pixels + yy * r.stride, static_cast<size_t>(r.width));
      resample_bilinear(packed.data(), r.width, r.height, 1, PixelLayout::interleaved, rbox, p.width, p.height, out,
                        PixelLayout::planar);
    } else {
      resample_bilinear(r.pixels, r.width, r.height, 1, PixelLayout::interleaved, rbox, p.width, p.height, out,
                        PixelLayout::planar);
    }
    for (int64_t c = 1; c < p.channels; ++c) std::memcpy(out + c * plane, out, static_cast<size_t>(plane));
    return;
  }
  const DecodedImage img = decode_image(bytes, name, &hint);
  if (img.scale != 1.0) {
    // libjpeg's scaled decode: decoded pixel i covers stored pixels [i / s, (i + 1) / s).
    box = {box.x * img.scale, box.y * img.scale, box.width * img.scale, box.height * img.scale};
  }
  finish_interleaved(img.pixels.data(), img.channels, img.height, img.width, box, p, out);
}

bool is_image_file_name(std::string_view file_name) {
  const size_t dot = file_name.rfind('.');
  if (dot == std::string_view::npos) return false;
  std::string ext(file_name.substr(dot + 1));
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == "jpg" || ext == "jpeg" || ext == "png";
}

}  // namespace convoy
