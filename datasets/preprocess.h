#pragma once
// Preprocessing: how one stored or encoded image becomes a model input of (C, H, W) u8, the
// geometric part of torchvision's transforms. Flip, pad-crop and normalization run later, on
// the training device, over the whole batch (engine/ops/normalize_augment.h).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace convoy {

// What the model wants and how to get there. Train mode takes a RandomResizedCrop when
// `random_resized_crop` is on; eval mode (and train mode without it) resizes the shorter
// side to `resize` and takes the centre (height x width), or with resize 0 resizes the whole
// image to (height x width). Resampling is bilinear with antialiasing when shrinking
// (torchvision's default, PIL's BILINEAR), colour conversion as OpenCV's (gray = 0.299 R +
// 0.587 G + 0.114 B; gray to colour repeats the channel; alpha is dropped).
struct Preprocess {
  int64_t channels = 1;  // 1 (gray) or 3 (RGB)
  int64_t height = 28;
  int64_t width = 28;
  int64_t resize = 0;  // shorter side before the centre crop; 0 = straight to (height, width)
  bool random_resized_crop = false;
  double scale_min = 0.08, scale_max = 1.0;  // of the source area
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;  // width / height of the crop

  bool operator==(const Preprocess&) const = default;
};

enum class SampleMode { train, eval };

// A rectangle of the source image, in source pixels (may be fractional, as torchvision's
// crop of a resized image maps back).
struct CropBox {
  double x = 0, y = 0, width = 0, height = 0;
};

// torchvision's RandomResizedCrop.get_params: ten tries at a random area in [scale_min,
// scale_max] and log-uniform ratio, then the centre crop of the ratio range's nearest. The
// random numbers come from counter_uniform(seed, 0, 1, ...), so the box is a pure function of
// (source size, p, seed).
CropBox random_resized_crop_box(int64_t src_width, int64_t src_height, const Preprocess& p, uint64_t seed);
// Eval: the part of the source that Resize(p.resize) + CenterCrop(p.height, p.width) keeps
// (the whole image when p.resize == 0).
CropBox center_crop_box(int64_t src_width, int64_t src_height, const Preprocess& p);
// The box for `mode`: random in train mode with p.random_resized_crop, else the centre one.
CropBox sample_box(int64_t src_width, int64_t src_height, const Preprocess& p, SampleMode mode, uint64_t seed);

// Pixels already in memory, (channels, height, width) u8 planar, preprocessed into `out`
// (p.channels, p.height, p.width) u8 planar.
void preprocess_pixels(const uint8_t* chw, int64_t channels, int64_t height, int64_t width, const Preprocess& p,
                       SampleMode mode, uint64_t seed, uint8_t* out);

// An encoded image file's bytes (JPEG through libjpeg-turbo, using its DCT-domain scaling when
// the box allows a smaller decode; PNG through libpng) preprocessed into `out` (p.channels,
// p.height, p.width) u8 planar. A corrupt, truncated or non-image file is an InputError
// naming `name` (the file's path).
void decode_preprocess(std::span<const uint8_t> bytes, std::string_view name, const Preprocess& p,
                       SampleMode mode, uint64_t seed, uint8_t* out);

// "image-folder" style extensions decode_preprocess reads: .jpg .jpeg .png (any case).
bool is_image_file_name(std::string_view file_name);

}  // namespace convoy
