// normalize_augment: u8 images (N, C, H, W) -> normalized f32/bf16 with the random crop
// (from the zero-padded image) and horizontal flip of ops.h, drawn from counter_hash so
// that the CPU computes the same batch bit for bit.
#include <climits>

#include "engine/core/counter_rng.h"
#include "kernels/common.cuh"
#include "kernels/normalize_augment.cuh"

namespace convoy::kernels {

// ---- kernels ------------------------------------------------------------------------------

// I: the index type, int32_t where every index fits (64-bit division is emulated: the
// int64_t kernel ran ResNet-50's batch at a tenth of the H200's bandwidth).
template <class T, class I>
__global__ void normalize_augment_kernel(NormalizeAugmentArgs a, const uint8_t* __restrict__ images,
                                         T* __restrict__ y, I total) {
  const I ac = I(a.c), ah = I(a.h), aw = I(a.w);
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < total; i += I(gridDim.x) * blockDim.x) {
    I n, c, h, w, rest = i;
    if (a.nhwc_out) {
      c = rest % ac; rest /= ac;
      w = rest % aw; rest /= aw;
      h = rest % ah; n = rest / ah;
    } else {
      w = rest % aw; rest /= aw;
      h = rest % ah; rest /= ah;
      c = rest % ac; n = rest / ac;
    }
    const uint64_t r = counter_hash(a.seed, static_cast<uint64_t>(n));
    I sh = h, sw = w;
    if (a.crop_padding > 0) {
      const uint64_t span = static_cast<uint64_t>(2 * a.crop_padding + 1);
      sh += static_cast<I>(r % span) - I(a.crop_padding);
      sw += static_cast<I>((r >> 16) % span) - I(a.crop_padding);
    }
    float v = 0.f;
    if (sh >= 0 && sh < ah && sw >= 0 && sw < aw) {
      // The flip comes first: the cropped image reads the flipped one.
      if (a.horizontal_flip && ((r >> 32) & 1)) sw = aw - 1 - sw;
      v = static_cast<float>(images[((n * ac + c) * ah + sh) * aw + sw]);
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
    if (total <= INT32_MAX / 2)  // room for the grid stride past the end
      normalize_augment_kernel<T, int32_t><<<grid_for(total), kThreads, 0, stream>>>(
          a, images, static_cast<T*>(y), static_cast<int32_t>(total));
    else
      normalize_augment_kernel<T, int64_t><<<grid_for(total), kThreads, 0, stream>>>(a, images,
                                                                                     static_cast<T*>(y), total);
    CONVOY_LAUNCH_CHECK(normalize_augment_kernel);
  });
}

}  // namespace convoy::kernels
