// im2col for nhwc inputs of 2-byte elements. Each thread writes 8 consecutive elements of the
// matrix (one 16-byte store), so a warp's stores cover 512 contiguous bytes; the reads of
// overlapping windows come from L1/L2. The thread decodes its row and first column once
// (multiply-and-shift dividers) and steps through (r, s, c) by carries, not divisions.
#include <climits>

#include "kernels/common.cuh"
#include "kernels/im2col.cuh"
#include "kernels/int_div.cuh"

namespace convoy::kernels {
namespace {

constexpr int kChunk = 8;  // elements a thread writes: 16 bytes

struct Im2colDims {
  int32_t h, w, c, s, sc;  // sc = s * c: the columns of one window row
  int32_t stride_h, stride_w, pad_h, pad_w;
  int32_t cols;            // r * s * c: the real columns
  int32_t chunks;          // ld / kChunk: 16-byte chunks a matrix row
  Div<int32_t> div_chunks, div_q, div_p, div_sc, div_c;
  int32_t p, q;
};

__global__ void im2col_nhwc_kernel(const uint16_t* __restrict__ x, uint4* __restrict__ col, Im2colDims d,
                                   int32_t total_chunks) {
  for (int32_t f = blockIdx.x * blockDim.x + threadIdx.x; f < total_chunks; f += gridDim.x * blockDim.x) {
    const int32_t row = d.div_chunks(f);
    const int32_t j = (f - row * d.chunks) * kChunk;
    const int32_t np = d.div_q(row);
    const int32_t q = row - np * d.q;
    const int32_t n = d.div_p(np);
    const int32_t p = np - n * d.p;
    int32_t r = d.div_sc(j);
    int32_t s = d.div_c(j - r * d.sc);
    int32_t c = j - r * d.sc - s * d.c;
    const int32_t h0 = p * d.stride_h - d.pad_h, w0 = q * d.stride_w - d.pad_w;
    const uint16_t* image = x + n * d.h * d.w * d.c;
    uint16_t v[kChunk];
#pragma unroll
    for (int e = 0; e < kChunk; ++e) {
      const int32_t hh = h0 + r, ww = w0 + s;
      const bool inside = j + e < d.cols && uint32_t(hh) < uint32_t(d.h) && uint32_t(ww) < uint32_t(d.w);
      v[e] = inside ? __ldg(image + (hh * d.w + ww) * d.c + c) : uint16_t(0);
      if (++c == d.c) {
        c = 0;
        if (++s == d.s) s = 0, ++r;
      }
    }
    uint4 packed;
    packed.x = v[0] | uint32_t(v[1]) << 16;
    packed.y = v[2] | uint32_t(v[3]) << 16;
    packed.z = v[4] | uint32_t(v[5]) << 16;
    packed.w = v[6] | uint32_t(v[7]) << 16;
    col[f] = packed;
  }
}

}  // namespace

bool im2col_fits(const WindowShape& sh, int64_t ld) {
  return sh.n * sh.h * sh.w * sh.c <= INT_MAX && sh.n * sh.p * sh.q * ld <= INT_MAX;
}

void im2col_nhwc(const void* x, void* col, const WindowShape& sh, int64_t ld, cudaStream_t stream) {
  const auto div = [](int64_t v) { return Div<int32_t>::make(v > 0 ? v : 1); };
  Im2colDims d;
  d.h = int32_t(sh.h), d.w = int32_t(sh.w), d.c = int32_t(sh.c), d.s = int32_t(sh.s);
  d.sc = int32_t(sh.s * sh.c);
  d.stride_h = int32_t(sh.stride_h), d.stride_w = int32_t(sh.stride_w);
  d.pad_h = int32_t(sh.pad_h), d.pad_w = int32_t(sh.pad_w);
  d.cols = int32_t(sh.r * sh.s * sh.c);
  d.chunks = int32_t(ld / kChunk);
  d.p = int32_t(sh.p), d.q = int32_t(sh.q);
  d.div_chunks = div(d.chunks), d.div_q = div(d.q), d.div_p = div(d.p), d.div_sc = div(d.sc), d.div_c = div(d.c);
  const int64_t total = sh.n * sh.p * sh.q * d.chunks;
  if (total == 0) return;
  im2col_nhwc_kernel<<<grid_for(total), kThreads, 0, stream>>>(static_cast<const uint16_t*>(x),
                                                               static_cast<uint4*>(col), d, int32_t(total));
  CONVOY_LAUNCH_CHECK(im2col_nhwc_kernel);
}

}  // namespace convoy::kernels
