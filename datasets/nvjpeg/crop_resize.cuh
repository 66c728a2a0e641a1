#pragma once
// The GPU half of the nvJPEG path: crops of decoded RGB images resampled into a batch of model
// inputs, with the CPU path's filter (datasets/resample.h). Lives here rather than in kernels/
// because only the nvJPEG decoder uses it and kernels/ sits above datasets/ in the layering.
#include <cuda_runtime.h>

#include <cstdint>

namespace convoy::nvjpeg {

// One image of a batch: its decoded pixels and the box of them (in pixels, may be fractional)
// that becomes the output.
struct CropResizeJob {
  const uint8_t* src = nullptr;  // (height, pitch) bytes, RGB interleaved
  int64_t pitch = 0;
  int32_t width = 0, height = 0;
  double box_x = 0, box_y = 0, box_width = 0, box_height = 0;
  uint8_t* dst = nullptr;  // (out_channels, out_height, out_width) u8 planar
  // The order of the passes, as resample_vertical_first gives it for this geometry: the CPU's
  // resampler takes the cheaper one, and each order rounds between its passes differently.
  int32_t vertical_first = 0;
};

// For each of `count` jobs (an array in device memory), PIL's antialiased BILINEAR resampling
// of the box to out_width x out_height, bit for bit as resample_bilinear computes it on the
// same pixels: the same 22-bit fixed-point weights and window bounds, the first pass (the one
// the job names) rounded and clamped to u8 before the second. out_channels 3 writes planar RGB; 1
// converts each source pixel to gray first (OpenCV's integer formula), as the CPU path does.
void launch_crop_resize(const CropResizeJob* jobs, int count, int out_width, int out_height, int out_channels,
                        cudaStream_t stream);

}  // namespace convoy::nvjpeg
