// PIL's antialiased bilinear resampling (Imaging/Resample.c) and OpenCV's RGB-to-gray, on u8.
#include "datasets/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/core/error.h"

namespace convoy {
namespace {

// PIL's PRECISION_BITS for 8-bit images: 32 - 8 (sample) - 2 (headroom for sums of weights).
constexpr int kPrecisionBits = 32 - 8 - 2;

// Per output position along one axis: the first source index, how many follow, their weights.
struct AxisWeights {
  std::vector<int32_t> start, count;
  std::vector<int32_t> weight;  // (out_size, taps) fixed point
  int64_t taps = 0;
};

double triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// PIL's precompute_coeffs with the bilinear filter (support 1), then normalize_coeffs_8bpc.
AxisWeights axis_weights(int64_t in_size, double in0, double in1, int64_t out_size) {
  const double scale = (in1 - in0) / static_cast<double>(out_size);
  const double filter_scale = std::max(scale, 1.0);
  const double support = 1.0 * filter_scale;
  AxisWeights a;
  a.taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  a.start.resize(out_size);
  a.count.resize(out_size);
  a.weight.assign(out_size * a.taps, 0);
  std::vector<double> k(a.taps);
  const double ss = 1.0 / filter_scale;
  for (int64_t xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (static_cast<double>(xx) + 0.5) * scale;
    // (int) truncation as in C, then clamped: PIL's exact bounds.
    int64_t xmin = static_cast<int64_t>(center - support + 0.5);
    xmin = std::max<int64_t>(xmin, 0);
    int64_t xmax = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in_size) - xmin;
    xmax = std::min<int64_t>(xmax, a.taps);
    double ww = 0.0;
    for (int64_t x = 0; x < xmax; ++x) {
      k[x] = triangle((static_cast<double>(x + xmin) - center + 0.5) * ss);
      ww += k[x];
    }
    if (xmax <= 0 || ww == 0.0) {
      // The window lies wholly outside the image (a box reaching past an edge): the nearest
      // edge pixel, where PIL would divide by zero.
      xmin = std::clamp<int64_t>(static_cast<int64_t>(std::floor(center)), 0, in_size - 1);
      xmax = 1;
      k[0] = ww = 1.0;
    }
    a.start[xx] = static_cast<int32_t>(xmin);
    a.count[xx] = static_cast<int32_t>(xmax);
    for (int64_t x = 0; x < xmax; ++x)
      a.weight[xx * a.taps + x] = static_cast<int32_t>(0.5 + k[x] / ww * (1 << kPrecisionBits));
  }
  return a;
}

inline uint8_t clip8(int32_t acc) {
  const int32_t v = acc >> kPrecisionBits;
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

// One axis is the identity when the box spans the whole source at the same size: PIL skips
// that pass, and so do we (the weights would be exact anyway, this is only for speed).
bool identity_axis(double box0, double box_size, int64_t in_size, int64_t out_size) {
  return box0 == 0.0 && box_size == static_cast<double>(in_size) && in_size == out_size;
}

// Scratch that lives as long as its worker thread: no allocation (or page fault) per image.
template <class T>
T* scratch(std::vector<T>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}

// The kernels. Each is instantiated twice, for plain x86-64 and for AVX2 (picked at run time),
// and written so that GCC vectorizes them: the vertical pass runs along whole rows, the
// horizontal pass over all P samples of a pixel at once (P = 4, RGBX, is one vector lane each).
#define CONVOY_KERNEL static inline __attribute__((always_inline))

// Vertical: out[i] = clip(sum_y k[y] * rows[y][i]) for i < len.
CONVOY_KERNEL void vertical_row(const uint8_t* first, int64_t stride, const int32_t* k, int n, int64_t len,
                                int32_t* acc, uint8_t* out) {
  for (int64_t i = 0; i < len; ++i) acc[i] = 1 << (kPrecisionBits - 1);
  for (int y = 0; y < n; ++y) {
    const uint8_t* __restrict r = first + y * stride;
    const int32_t ky = k[y];
    int32_t* __restrict a = acc;
    for (int64_t i = 0; i < len; ++i) a[i] += r[i] * ky;
  }
  for (int64_t i = 0; i < len; ++i) {
    const int32_t v = acc[i] >> kPrecisionBits;
    out[i] = static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
  }
}

// Horizontal over one row of P-sample pixels: output pixel xx's first O samples go to
// out[xx * px_step + c * ch_step].
template <int P, int O>
CONVOY_KERNEL void horizontal_row(const uint8_t* src, const AxisWeights& wx, int64_t out_width, uint8_t* out,
                                  int64_t px_step, int64_t ch_step) {
  const int32_t* weights = wx.weight.data();
  for (int64_t xx = 0; xx < out_width; ++xx) {
    const int32_t* k = weights + xx * wx.taps;
    const uint8_t* p = src + static_cast<int64_t>(wx.start[xx]) * P;
    const int n = wx.count[xx];
    int32_t acc[P];
    for (int c = 0; c < P; ++c) acc[c] = 1 << (kPrecisionBits - 1);
    for (int x = 0; x < n; ++x)
      for (int c = 0; c < P; ++c) acc[c] += p[x * P + c] * k[x];
    for (int c = 0; c < O; ++c) out[xx * px_step + c * ch_step] = clip8(acc[c]);
  }
}

// The rows (or columns) of the source that contribute at all: [first, first + count).
std::pair<int64_t, int64_t> contributing(const AxisWeights& a, int64_t out_size) {
  int64_t first = a.start[0], last = 0;
  for (int64_t i = 0; i < out_size; ++i) {
    first = std::min<int64_t>(first, a.start[i]);
    last = std::max<int64_t>(last, a.start[i] + a.count[i]);
  }
  return {first, last - first};
}

// Multiply-adds per pixel of each order, the horizontal ones weighted as costlier (gathers,
// where the vertical pass runs along contiguous rows). Independent of the samples per pixel, so
// that planar and interleaved sources of one image take the same order and give the same bytes.
bool vertical_pass_first(bool h_identity, int64_t h_taps, int64_t v_taps, int64_t rows, int64_t cols,
                         int64_t out_width, int64_t out_height) {
  const double h_cost = 3.0 * static_cast<double>(out_width) * static_cast<double>(h_identity ? 0 : h_taps);
  const double v_cost = static_cast<double>(v_taps);
  const double v_first = static_cast<double>(out_height) * (static_cast<double>(cols) * v_cost + h_cost);
  const double h_first = static_cast<double>(rows) * h_cost + static_cast<double>(out_height * out_width) * v_cost;
  return h_identity || v_first < h_first;
}

struct Job {
  const uint8_t* src;
  int64_t src_width, src_height, src_stride;  // stride in bytes between rows
  CropBox box;
  int64_t out_width, out_height;
  uint8_t* dst;
  int64_t row_step, px_step, ch_step;
};

// Resamples one image of P-sample interleaved pixels (P = 1: one plane), keeping the first O
// samples; the output sample (y, x, c) goes to dst[y * row_step + x * px_step + c * ch_step].
// The order of the passes follows the work: the vertical one first when it removes more than
// the horizontal one would (it is the cheaper, contiguous one), else PIL's horizontal first.
// Both orders round once per pass, so each stays within 1 of the exact float result.
template <int P, int O>
CONVOY_KERNEL void resample_impl(const Job& j) {
  thread_local AxisWeights wx, wy;
  thread_local std::vector<uint8_t> tmp_store, line_store;
  thread_local std::vector<int32_t> acc_store;
  const bool h_identity = identity_axis(j.box.x, j.box.width, j.src_width, j.out_width);
  const bool v_identity = identity_axis(j.box.y, j.box.height, j.src_height, j.out_height);
  if (!h_identity) wx = axis_weights(j.src_width, j.box.x, j.box.x + j.box.width, j.out_width);
  if (!v_identity) wy = axis_weights(j.src_height, j.box.y, j.box.y + j.box.height, j.out_height);

  // The source rows (vertical) and columns (horizontal) that contribute at all.
  int64_t first_row = 0, rows = j.src_height, first_col = 0, cols = j.src_width;
  if (!v_identity) std::tie(first_row, rows) = contributing(wy, j.out_height);
  if (!h_identity) std::tie(first_col, cols) = contributing(wx, j.out_width);

  if (v_identity && h_identity) {
    for (int64_t yy = 0; yy < j.out_height; ++yy) {
      const uint8_t* r = j.src + yy * j.src_stride;
      uint8_t* d = j.dst + yy * j.row_step;
      for (int64_t x = 0; x < j.out_width; ++x)
        for (int c = 0; c < O; ++c) d[x * j.px_step + c * j.ch_step] = r[x * P + c];
    }
    return;
  }
  if (v_identity) {  // horizontal only
    for (int64_t yy = 0; yy < j.out_height; ++yy)
      horizontal_row<P, O>(j.src + yy * j.src_stride, wx, j.out_width, j.dst + yy * j.row_step, j.px_step, j.ch_step);
    return;
  }
  int32_t* acc = scratch(acc_store, std::max(cols, j.out_width) * P);
  if (vertical_pass_first(h_identity, wx.taps, wy.taps, rows, cols, j.out_width, j.out_height)) {
    // Vertical first, over the contributing columns only, then each row horizontally.
    uint8_t* line = scratch(line_store, cols * P);
    const uint8_t* base = j.src + first_col * P;
    for (int64_t yy = 0; yy < j.out_height; ++yy) {
      const uint8_t* first = base + static_cast<int64_t>(wy.start[yy]) * j.src_stride;
      const int32_t* k = wy.weight.data() + yy * wy.taps;
      uint8_t* d = j.dst + yy * j.row_step;
      if (h_identity) {
        vertical_row(first, j.src_stride, k, wy.count[yy], cols * P, acc, line);
        for (int64_t x = 0; x < j.out_width; ++x)
          for (int c = 0; c < O; ++c) d[x * j.px_step + c * j.ch_step] = line[x * P + c];
      } else {
        vertical_row(first, j.src_stride, k, wy.count[yy], cols * P, acc, line);
        // The weights index source columns: shift the row back by first_col.
        horizontal_row<P, O>(line - first_col * P, wx, j.out_width, d, j.px_step, j.ch_step);
      }
    }
    return;
  }
  // Horizontal first over the contributing rows into (rows, out_width, P), then vertical.
  const int64_t row_len = j.out_width * P;
  uint8_t* tmp = scratch(tmp_store, rows * row_len);
  for (int64_t y = 0; y < rows; ++y)
    horizontal_row<P, P>(j.src + (first_row + y) * j.src_stride, wx, j.out_width, tmp + y * row_len, P, 1);
  uint8_t* line = scratch(line_store, row_len);
  for (int64_t yy = 0; yy < j.out_height; ++yy) {
    const int32_t* k = wy.weight.data() + yy * wy.taps;
    vertical_row(tmp + (wy.start[yy] - first_row) * row_len, row_len, k, wy.count[yy], row_len, acc, line);
    uint8_t* d = j.dst + yy * j.row_step;
    for (int64_t x = 0; x < j.out_width; ++x)
      for (int c = 0; c < O; ++c) d[x * j.px_step + c * j.ch_step] = line[x * P + c];
  }
}

template <int P, int O>
void resample_default(const Job& j) { resample_impl<P, O>(j); }
template <int P, int O>
__attribute__((target("avx2"))) void resample_avx2(const Job& j) { resample_impl<P, O>(j); }

template <int P, int O>
void resample_dispatch(const Job& j) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) resample_avx2<P, O>(j);
  else resample_default<P, O>(j);
}

}  // namespace

void resample_bilinear(const uint8_t* src, int64_t src_width, int64_t src_height, int64_t channels,
                       PixelLayout in_layout, const CropBox& box, int64_t out_width, int64_t out_height,
                       uint8_t* dst, PixelLayout out_layout) {
  CONVOY_CHECK(src_width > 0 && src_height > 0 && out_width > 0 && out_height > 0, "resample: empty image");
  CONVOY_CHECK(box.width > 0 && box.height > 0, "resample: empty box");
  const int64_t plane = out_width * out_height;
  if (in_layout == PixelLayout::planar || channels == 1) {
    // Each plane on its own, as a one-channel image.
    CONVOY_CHECK(out_layout == PixelLayout::planar || channels == 1, "resample: planar to interleaved");
    for (int64_t c = 0; c < channels; ++c)
      resample_dispatch<1, 1>({src + c * src_width * src_height, src_width, src_height, src_width, box, out_width,
                               out_height, dst + c * plane, out_width, 1, 0});
    return;
  }
  const bool planar_out = out_layout == PixelLayout::planar;
  const Job j{src, src_width, src_height, src_width * channels, box, out_width, out_height, dst,
              planar_out ? out_width : out_width * channels, planar_out ? 1 : channels, planar_out ? plane : 1};
  switch (channels) {
    case 3: return resample_dispatch<3, 3>(j);
    case 4: return resample_dispatch<4, 4>(j);
    case 2: return resample_dispatch<2, 2>(j);
    default: CONVOY_CHECK(false, "resample: channels must be 1 to 4");
  }
}

void resample_rgbx_to_planar(const uint8_t* src, int64_t src_width, int64_t src_height, int64_t src_stride,
                             const CropBox& box, int64_t out_width, int64_t out_height, uint8_t* dst) {
  CONVOY_CHECK(src_width > 0 && src_height > 0 && out_width > 0 && out_height > 0, "resample: empty image");
  CONVOY_CHECK(box.width > 0 && box.height > 0, "resample: empty box");
  resample_dispatch<4, 3>({src, src_width, src_height, src_stride, box, out_width, out_height, dst, out_width, 1,
                           out_width * out_height});
}

void rgb_to_gray(const uint8_t* r, const uint8_t* g, const uint8_t* b, int64_t src_stride, int64_t pixels,
                 uint8_t* gray) {
  for (int64_t i = 0; i < pixels; ++i) {
    const int64_t o = i * src_stride;
    gray[i] = static_cast<uint8_t>((r[o] * 4899 + g[o] * 9617 + b[o] * 1868 + 8192) >> 14);
  }
}

bool resample_vertical_first(int64_t src_width, int64_t src_height, const CropBox& box, int64_t out_width,
                             int64_t out_height) {
  const bool h_identity = identity_axis(box.x, box.width, src_width, out_width);
  const bool v_identity = identity_axis(box.y, box.height, src_height, out_height);
  if (h_identity || v_identity) return h_identity;  // one pass only, or none: the order changes nothing
  const AxisWeights wx = axis_weights(src_width, box.x, box.x + box.width, out_width);
  const AxisWeights wy = axis_weights(src_height, box.y, box.y + box.height, out_height);
  return vertical_pass_first(false, wx.taps, wy.taps, contributing(wy, out_height).second,
                             contributing(wx, out_width).second, out_width, out_height);
}

}  // namespace convoy
