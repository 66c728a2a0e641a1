#include "engine/ops/normalize_augment.h"

#include "engine/core/error.h"
#include "engine/ops/op_check.h"

namespace convoy {

NormalizeAugment make_normalize(const std::vector<double>& mean, const std::vector<double>& std) {
  NormalizeAugment n;
  CONVOY_CHECK(mean.size() == std.size() && mean.size() <= 4, "mean/std per channel");
  for (size_t c = 0; c < 4; ++c) {  // one value serves every channel
    const size_t from = mean.size() == 1 ? 0 : c;
    if (from >= mean.size()) break;
    n.mean[c] = static_cast<float>(mean[from]);
    n.std[c] = static_cast<float>(std[from]);
  }
  return n;
}

void check_normalize_augment(const Tensor& images, const NormalizeAugment& a, const Tensor& y, Device device) {
  const OpCheck c("normalize_augment", device);
  c.here(images, "images").floating(y, "y");
  c.that(images.dtype() == DType::u8 && images.ndim() == 4,
         [&] { return "images must be (N, C, H, W) U8, nchw or nhwc, got " + describe(images); });
  c.that(y.shape() == images.shape(),
         [&] { return "y " + describe(y) + " must have the images' shape " + shape_str(images.shape()); });
  c.that(images.dim(1) <= 4, [&] { return "at most 4 channels, got " + describe(images); });
  c.that(a.crop_padding >= 0, "crop_padding must not be negative");
  for (int64_t ch = 0; ch < images.dim(1); ++ch)
    c.that(a.std[ch] != 0.f, [&] { return "std of channel " + std::to_string(ch) + " is 0"; });
}

}  // namespace convoy
