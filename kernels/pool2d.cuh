#pragma once
// Host-side launchers of pool2d.cu (no device code here; the backend includes it). Each
// queues its work on `stream`, checks the launch, and returns without synchronizing.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/dt.cuh"

namespace convoy::kernels {

struct PoolShape {
  int64_t n, c, h, w, p, q;  // input (n, c, h, w), output (n, c, p, q)
  int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  bool nhwc;
  bool max;  // else average over the window clipped to the unpadded input
};
// Whether a max-pooling forward of this shape can record its argmax for the backward (nhwc,
// channels a multiple of the vector width, a window of fewer than 255 elements).
bool pool2d_records_argmax(const PoolShape& s, Dt dt);
// With `argmax` (one byte per element of y, 8-byte aligned; where pool2d_records_argmax), also
// records each window's argmax; returns whether it did.
bool pool2d_forward(const PoolShape& s, Dt dt, const void* x, void* y, cudaStream_t stream,
                    uint8_t* argmax = nullptr);
// Max: the gradient goes to the first maximum of each window (PyTorch's choice).
// y is the forward's output (max pooling's window maxima); argmax, when given, what the forward
// recorded (then x and y are not read).
void pool2d_backward(const PoolShape& s, Dt dt, const void* x, const void* y, const void* dy, void* dx,
                     cudaStream_t stream, const uint8_t* argmax = nullptr);

}  // namespace convoy::kernels
