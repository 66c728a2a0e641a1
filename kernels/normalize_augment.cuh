#pragma once
// Host-side launcher of normalize_augment.cu (no device code here; the backend includes it).
// It queues its work on `stream`, checks the launch, and returns without synchronizing.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/dt.cuh"

namespace convoy::kernels {

struct NormalizeAugmentArgs {
  float mean[4], std[4];
  int64_t crop_padding;
  bool horizontal_flip;
  uint64_t seed;
  int64_t n, c, h, w;
  bool nhwc_out;
  bool nhwc_in;  // the images' memory order (a client's channels-last pixels)
};
// images u8 (n, c, h, w) nchw or nhwc -> y (n, c, h, w) in out_dt (floating), nchw or nhwc.
void normalize_augment(const NormalizeAugmentArgs& a, const uint8_t* images, Dt out_dt, void* y,
                       cudaStream_t stream);

}  // namespace convoy::kernels
