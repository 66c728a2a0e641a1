#pragma once
// Resampling and colour conversion of 8-bit pixels: PIL's antialiased BILINEAR, OpenCV's luma.
#include <cstdint>

#include "datasets/preprocess.h"

namespace convoy {

// How a resampler reads and writes its pixels.
enum class PixelLayout { interleaved, planar };  // (H, W, C) or (C, H, W)

// Resamples the region `box` of `src` (src_width x src_height, `channels` u8 samples per
// pixel) to out_width x out_height, as PIL's Image.resize(..., BILINEAR, box) does: a
// triangle filter stretched by the scale when shrinking (antialiasing; torchvision's
// antialias=True), plain bilinear with half-pixel centres when enlarging, weights
// normalized where the window leaves the image, 22-bit fixed-point weights, a horizontal
// pass then a vertical one, each rounded to nearest and clamped to [0, 255]. `dst` holds
// (out_height, out_width) pixels in `out_layout`; `src` is in `in_layout`.
void resample_bilinear(const uint8_t* src, int64_t src_width, int64_t src_height, int64_t channels,
                       PixelLayout in_layout, const CropBox& box, int64_t out_width, int64_t out_height,
                       uint8_t* dst, PixelLayout out_layout);

// The same resampling of RGBX pixels (4 bytes each, the fourth ignored; rows src_stride bytes
// apart) into (3, out_height, out_width) planar RGB: what the JPEG path decodes to, one vector
// lane per pixel.
void resample_rgbx_to_planar(const uint8_t* src, int64_t src_width, int64_t src_height, int64_t src_stride,
                             const CropBox& box, int64_t out_width, int64_t out_height, uint8_t* dst);

// Whether resample_bilinear runs its vertical pass before the horizontal one for this geometry
// (it takes the cheaper order; each order rounds once per pass, so they can differ by 1): for the
// GPU resampler (datasets/nvjpeg/), which takes the same order to give the same bytes.
bool resample_vertical_first(int64_t src_width, int64_t src_height, const CropBox& box, int64_t out_width,
                             int64_t out_height);

// OpenCV's RGB to gray, (R*4899 + G*9617 + B*1868 + 8192) >> 14 (0.299 R + 0.587 G + 0.114 B),
// over `pixels` pixels whose samples are `src_stride` bytes apart in each of the three
// channel runs starting at r, g, b; one gray byte per pixel into `gray`.
void rgb_to_gray(const uint8_t* r, const uint8_t* g, const uint8_t* b, int64_t src_stride, int64_t pixels,
                 uint8_t* gray);

}  // namespace convoy
