// normalize_augment reads u8 images channels-last (nhwc, as a client sends [n, H, W, C] pixels)
// exactly as the same pixels channels-first, crops and flips included.
#include <gtest/gtest.h>

#include <random>

#include "engine/backends/backend.h"
#include "engine/core/tensor.h"
#include "engine/ops/normalize_augment.h"

namespace convoy {
namespace {

TEST(NormalizeChannelsLast, NhwcImagesGiveWhatTheSameNchwImagesGive) {
  auto cpu = make_cpu_backend({});
  const int64_t n = 3, c = 3, h = 7, w = 5;
  Tensor nchw = Tensor::empty({n, c, h, w}, DType::u8);
  std::mt19937 rng(4);
  for (int64_t i = 0; i < nchw.numel(); ++i) nchw.data<uint8_t>()[i] = static_cast<uint8_t>(rng());
  // The same pixels in nhwc memory order, tagged so.
  Tensor nhwc = Tensor::empty({n, c, h, w}, DType::u8).with_layout(Layout::nhwc);
  for (int64_t s = 0; s < n; ++s)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          nhwc.data<uint8_t>()[((s * h + y) * w + x) * c + ch] = nchw.data<uint8_t>()[((s * c + ch) * h + y) * w + x];
  NormalizeAugment a;
  for (int i = 0; i < 3; ++i) a.mean[i] = 0.4f + 0.05f * static_cast<float>(i), a.std[i] = 0.2f + 0.03f * static_cast<float>(i);
  for (const bool augment : {false, true}) {
    a.crop_padding = augment ? 2 : 0;
    a.horizontal_flip = augment;
    Tensor want = cpu->empty({n, c, h, w}, DType::f32), got = cpu->empty({n, c, h, w}, DType::f32);
    cpu->ops().normalize_augment(nchw, a, 17, want);
    cpu->ops().normalize_augment(nhwc, a, 17, got);
    EXPECT_EQ(got.to_floats(), want.to_floats()) << (augment ? "with crop and flip" : "plain");
  }
}

}  // namespace
}  // namespace convoy
