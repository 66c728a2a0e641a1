// normalize_augment: u8 images (N, C, H, W) -> normalized f32/bf16 with the random crop
// (from the zero-padded image) and horizontal flip of ops.h, drawn from counter_hash so
// that the CPU computes the same batch bit for bit.
#include "engine/core/counter_rng.h"
#include "kernels/common.cuh"
#include "kernels/normalize_augment.cuh"

namespace convoy::kernels {

// ---- kernels ------------------------------------------------------------------------------

template <class T>
__global__ void normalize_augment_kernel(NormalizeAugmentArgs a, const uint8_t* __restrict__ images,
                                         T* __restrict__ y, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t n, c, h, w, rest = i;
    if (a.nhwc_out) {
      c = rest % a.c; rest /= a.c;
      w = rest % a.w; rest /= a.w;
      h = rest % a.h; n = rest / a.h;
    } else {
      w = rest % a.w; rest /= a.w;
      h = rest % a.h; rest /= a.h;
      c = rest % a.c; n = rest / a.c;
    }
    const uint64_t r = counter_hash(a.seed, static_cast<uint64_t>(n));
    int64_t sh = h, sw = w;
    if (a.crop_padding > 0) {
      const uint64_t span = static_cast<uint64_t>(2 * a.crop_padding + 1);
      sh += static_cast<int64_t>(r % span) - a.crop_padding;
      sw += static_cast<int64_t>((r >> 16) % span) - a.crop_padding;
    }
    float v = 0.f;
    if (sh >= 0 && sh < a.h && sw >= 0 && sw < a.w) {
      // The flip comes first: the cropped image reads the flipped one.
      if (a.horizontal_flip && ((r >> 32) & 1)) sw = a.w - 1 - sw;
      v = static_cast<float>(a.nhwc_in ? images[((n * a.h + sh) * a.w + sw) * a.c + c]
                                       : images[((n * a.c + c) * a.h + sh) * a.w + sw]);
    }
    // The CPU's arithmetic, operation by operation (no FMA contraction): equal bit for bit.
    const float inv_std = __fdiv_rn(1.f, a.std[c]);
    y[i] = from_f32<T>(__fmul_rn(__fsub_rn(__fmul_rn(v, 1.f / 255.f), a.mean[c]), inv_std));
  }
}

// ---- launchers ----------------------------------------------------------------------------

void normalize_augment(const NormalizeAugmentArgs& a, const uint8_t* images, Dt out_dt, void* y,
                       cudaStream_t stream) {
  const int64_t total = a.n * a.c * a.h * a.w;
  if (total == 0) return;
  dispatch_float(out_dt, "normalize_augment", [&](auto t) {
    using T = decltype(t);
    normalize_augment_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(a, images,
                                                                          static_cast<T*>(y), total);
    CONVOY_LAUNCH_CHECK(normalize_augment_kernel);
  });
}

}  // namespace convoy::kernels
