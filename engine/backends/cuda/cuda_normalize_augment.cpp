// CudaOps input pipeline: u8 images to normalized, augmented floats on the GPU.
#include "engine/backends/cuda/cuda_ops.h"

#include "engine/backends/cuda/cuda_ops_internal.h"
#include "kernels/normalize_augment.cuh"

namespace convoy::cuda {

void CudaOps::normalize_augment(const Tensor& images, const NormalizeAugment& a, uint64_t seed,
                                Tensor& y) {
  check_normalize_augment(images, a, y, device());
  require_supported(OpKind::normalize_augment, y);
  kernels::NormalizeAugmentArgs k{};
  for (int i = 0; i < 4; ++i) {
    k.mean[i] = a.mean[i];
    k.std[i] = a.std[i];
  }
  k.crop_padding = a.crop_padding;
  k.horizontal_flip = a.horizontal_flip;
  k.seed = seed;
  k.n = images.dim(0); k.c = images.dim(1); k.h = images.dim(2); k.w = images.dim(3);
  k.nhwc_out = y.layout() == Layout::nhwc;
  k.nhwc_in = images.layout() == Layout::nhwc;
  kernels::normalize_augment(k, images.data<uint8_t>(), dt_of(y.dtype()), y.raw(), ctx_.stream);
}

}  // namespace convoy::cuda
