// im2col for nhwc inputs of 2-byte elements. One block makes the matrix rows of one output image
// row (n, p): it copies the r input rows its windows cover into shared memory, zero-padded left
// and right (and zero where a row lies outside the image), then each thread writes 16-byte
// chunks of the block's contiguous part of the matrix, so the stores are coalesced and each
// input row is read from memory once per output row that needs it, not once per window. A
// thread decodes its chunk's window and first column once (multiply-and-shift dividers) and
// steps through the (s, c) run of each window row, contiguous in shared memory, by one carry.
#include <climits>

#include "kernels/common.cuh"
#include "kernels/im2col.cuh"
#include "kernels/int_div.cuh"

namespace convoy::kernels {
namespace {

constexpr int kChunk = 8;                 // elements a thread writes at once: 16 bytes
constexpr int kIm2colThreads = 256;
constexpr int64_t kTileBytes = 48 << 10;  // shared memory a block may take without opting in

struct Im2colDims {
  int32_t h, w, c, r, p, q;
  int32_t stride_h, stride_w, pad_h, pad_w;
  int32_t row;     // (w + 2 pad_w) * c: one zero-padded input row in shared memory
  int32_t window;  // s * c: one window row's run of elements
  int32_t cols;    // r * s * c: the real columns
  int32_t chunks;  // ld / kChunk: 16-byte chunks a matrix row
  Div<int32_t> div_chunks, div_window;
};

__global__ void __launch_bounds__(kIm2colThreads)
im2col_nhwc_kernel(const uint16_t* __restrict__ x, uint4* __restrict__ col, Im2colDims d) {
  extern __shared__ uint16_t tile[];  // [r][(pad_w + w + pad_w) * c]
  const int32_t image_row = blockIdx.x;  // n * p_count + p
  const int32_t n = image_row / d.p, p = image_row - n * d.p;
  const int32_t pad = d.pad_w * d.c, width = d.w * d.c;
  for (int32_t r = 0; r < d.r; ++r) {
    const int32_t hh = p * d.stride_h - d.pad_h + r;
    const bool inside = uint32_t(hh) < uint32_t(d.h);
    const uint16_t* src = x + (int64_t(n) * d.h + (inside ? hh : 0)) * width;
    uint16_t* dst = tile + r * d.row;
    for (int32_t k = threadIdx.x; k < d.row; k += blockDim.x) {
      const int32_t from = k - pad;
      dst[k] = inside && uint32_t(from) < uint32_t(width) ? __ldg(src + from) : uint16_t(0);
    }
  }
  __syncthreads();
  const int32_t total = d.q * d.chunks;
  uint4* out = col + int64_t(image_row) * total;
  for (int32_t f = threadIdx.x; f < total; f += blockDim.x) {
    const int32_t q = d.div_chunks(f);
    const int32_t j = (f - q * d.chunks) * kChunk;
    int32_t r = d.div_window(j);
    int32_t run = j - r * d.window;  // (s, c) within the window row
    const uint16_t* left = tile + q * d.stride_w * d.c;  // the window's first column, padded coordinates
    uint16_t v[kChunk];
#pragma unroll
    for (int e = 0; e < kChunk; ++e) {
      v[e] = j + e < d.cols ? left[r * d.row + run] : uint16_t(0);
      if (++run == d.window) run = 0, ++r;
    }
    uint4 packed;
    packed.x = v[0] | uint32_t(v[1]) << 16;
    packed.y = v[2] | uint32_t(v[3]) << 16;
    packed.z = v[4] | uint32_t(v[5]) << 16;
    packed.w = v[6] | uint32_t(v[7]) << 16;
    out[f] = packed;
  }
}

int64_t tile_bytes(const WindowShape& sh) { return sh.r * (sh.w + 2 * sh.pad_w) * sh.c * 2; }

}  // namespace

bool im2col_fits(const WindowShape& sh, int64_t ld) {
  // The matrix's size bounds the grid too: n * p blocks.
  return sh.n * sh.h * sh.w * sh.c <= INT_MAX && sh.n * sh.p * sh.q * ld <= INT_MAX && tile_bytes(sh) <= kTileBytes;
}

void im2col_nhwc(const void* x, void* col, const WindowShape& sh, int64_t ld, cudaStream_t stream) {
  if (sh.n * sh.p * sh.q == 0) return;
  Im2colDims d;
  d.h = int32_t(sh.h), d.w = int32_t(sh.w), d.c = int32_t(sh.c), d.r = int32_t(sh.r);
  d.p = int32_t(sh.p), d.q = int32_t(sh.q);
  d.stride_h = int32_t(sh.stride_h), d.stride_w = int32_t(sh.stride_w);
  d.pad_h = int32_t(sh.pad_h), d.pad_w = int32_t(sh.pad_w);
  d.row = int32_t((sh.w + 2 * sh.pad_w) * sh.c);
  d.window = int32_t(sh.s * sh.c);
  d.cols = int32_t(sh.r * sh.s * sh.c);
  d.chunks = int32_t(ld / kChunk);
  d.div_chunks = Div<int32_t>::make(d.chunks), d.div_window = Div<int32_t>::make(d.window);
  im2col_nhwc_kernel<<<unsigned(sh.n * sh.p), kIm2colThreads, size_t(tile_bytes(sh)), stream>>>(
      static_cast<const uint16_t*>(x), static_cast<uint4*>(col), d);
  CONVOY_LAUNCH_CHECK(im2col_nhwc_kernel);
}

}  // namespace convoy::kernels
