#pragma once
// Host-side launcher of im2col.cu: the windows of an nhwc image batch as the rows of a
// matrix, so that a convolution becomes one GEMM (the backend's stem convolutions).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace convoy::kernels {

// The geometry of one convolution's input windows: x is (n, h, w, c) nhwc, each window
// r x s with the given stride and padding (dilation 1), p x q windows an image.
struct WindowShape {
  int64_t n, h, w, c;
  int64_t r, s, stride_h, stride_w, pad_h, pad_w;
  int64_t p, q;
};

// True when im2col can index x and its matrix with 32-bit integers (`ld` columns a row).
bool im2col_fits(const WindowShape& shape, int64_t ld);

// col[(n, p, q)][(r, s, c)] = x[n, p * stride_h - pad_h + r, q * stride_w - pad_w + s, c]
// (zero outside the image), a row-major matrix of n * p * q rows and `ld` columns, where
// `ld` >= r * s * c is a multiple of 8; the columns past r * s * c are zero. Elements are
// 2 bytes (bf16 or f16: this is a copy); x and col 16-byte aligned; im2col_fits(shape, ld).
void im2col_nhwc(const void* x, void* col, const WindowShape& shape, int64_t ld, cudaStream_t stream);

}  // namespace convoy::kernels
