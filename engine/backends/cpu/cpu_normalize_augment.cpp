// normalize_augment as an OpenMP loop: a u8 batch to normalized f32 or bf16, with the random
// crop and flip drawn from counter_hash(seed, sample).
#include <cstdint>

#include "engine/backends/cpu/cpu_loops.h"
#include "engine/backends/cpu/cpu_ops.h"
#include "engine/core/counter_rng.h"

namespace convoy::cpu {

void CpuOps::normalize_augment(const Tensor& images, const NormalizeAugment& a, uint64_t seed,
                               Tensor& y) {
  check_normalize_augment(images, a, y, Device::cpu());
  require_supported(OpKind::normalize_augment, {{y, "y"}});
  const int64_t n = images.dim(0), c = images.dim(1), h = images.dim(2), w = images.dim(3);
  const uint8_t* src = images.data<uint8_t>();
  // A pixel's offset within its sample, by channel, row and column: nchw planes or nhwc pixels.
  const bool nhwc = images.layout() == Layout::nhwc;
  const int64_t step_c = nhwc ? 1 : h * w, step_h = nhwc ? w * c : w, step_w = nhwc ? c : 1;
  const uint64_t range = static_cast<uint64_t>(2 * a.crop_padding + 1);
  const int nt = team(threads_);
  with_writer(y, [&](auto write) {
#pragma omp parallel for collapse(2) num_threads(nt) if (y.numel() >= kParallelMin) schedule(static)
    for (int64_t s = 0; s < n; ++s) {
      for (int64_t ch = 0; ch < c; ++ch) {
        const uint64_t r = counter_hash(seed, static_cast<uint64_t>(s));
        const int64_t oy = static_cast<int64_t>(r % range) - a.crop_padding;
        const int64_t ox = static_cast<int64_t>((r >> 16) % range) - a.crop_padding;
        const bool flip = a.horizontal_flip && ((r >> 32) & 1u);
        const float mean = a.mean[ch], inv_std = 1.0f / a.std[ch];
        const uint8_t* plane = src + s * c * h * w + ch * step_c;
        const int64_t out = (s * c + ch) * h * w;
        for (int64_t i = 0; i < h; ++i) {
          const int64_t si = i + oy;
          for (int64_t j = 0; j < w; ++j) {
            const int64_t sj = j + ox;  // column in the flipped image
            float v = 0.0f;
            if (si >= 0 && si < h && sj >= 0 && sj < w)
              v = plane[si * step_h + (flip ? w - 1 - sj : sj) * step_w];
            write(out + i * w + j, (v * (1.0f / 255.0f) - mean) * inv_std);
          }
        }
      }
    }
  });
}

}  // namespace convoy::cpu
