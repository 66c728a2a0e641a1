// PIL's antialiased bilinear resampling (Imaging/Resample.c) and OpenCV's RGB-to-gray, on u8.
#include "datasets/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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

// Horizontal pass over `rows` rows of C-channel interleaved pixels (row stride in bytes).
template <int C>
void horizontal(const uint8_t* src, int64_t src_row_stride, int64_t rows, const AxisWeights& wx,
                int64_t out_width, uint8_t* dst) {  // dst: (rows, out_width, C) u8
  for (int64_t y = 0; y < rows; ++y) {
    const uint8_t* s = src + y * src_row_stride;
    uint8_t* d = dst + y * out_width * C;
    for (int64_t xx = 0; xx < out_width; ++xx) {
      const int32_t* k = wx.weight.data() + xx * wx.taps;
      const uint8_t* p = s + static_cast<int64_t>(wx.start[xx]) * C;
      const int n = wx.count[xx];
      int32_t acc[C];
      for (int c = 0; c < C; ++c) acc[c] = 1 << (kPrecisionBits - 1);
      for (int x = 0; x < n; ++x)
        for (int c = 0; c < C; ++c) acc[c] += p[x * C + c] * k[x];
      for (int c = 0; c < C; ++c) d[xx * C + c] = clip8(acc[c]);
    }
  }
}

// Resamples one C-channel interleaved image (or one plane, C = 1); the output sample
// (y, x, c) goes to dst[y * row_step + x * px_step + c * ch_step].
template <int C>
void resample_interleaved(const uint8_t* src, int64_t src_width, int64_t src_height, const CropBox& box,
                          int64_t out_width, int64_t out_height, uint8_t* dst, int64_t row_step,
                          int64_t px_step, int64_t ch_step) {
  const bool h_identity = identity_axis(box.x, box.width, src_width, out_width);
  const bool v_identity = identity_axis(box.y, box.height, src_height, out_height);
  const int64_t row_len = out_width * C;

  // The rows the vertical pass reads: the horizontal pass only runs over those.
  AxisWeights wy;
  int64_t first_row = 0, rows = src_height;
  if (!v_identity) {
    wy = axis_weights(src_height, box.y, box.y + box.height, out_height);
    first_row = wy.start[0];
    int64_t last = 0;
    for (int64_t yy = 0; yy < out_height; ++yy) {
      first_row = std::min<int64_t>(first_row, wy.start[yy]);
      last = std::max<int64_t>(last, wy.start[yy] + wy.count[yy]);
    }
    rows = last - first_row;
  } else {
    rows = out_height;
  }

  std::vector<uint8_t> tmp;  // (rows, out_width, C) u8: the horizontal pass's output
  const uint8_t* hrows;
  int64_t hstride;
  if (h_identity) {
    hrows = src + first_row * src_width * C;
    hstride = src_width * C;
  } else {
    const AxisWeights wx = axis_weights(src_width, box.x, box.x + box.width, out_width);
    tmp.resize(static_cast<size_t>(rows * row_len));
    horizontal<C>(src + first_row * src_width * C, src_width * C, rows, wx, out_width, tmp.data());
    hrows = tmp.data();
    hstride = row_len;
  }

  std::vector<int32_t> acc(static_cast<size_t>(row_len));
  std::vector<uint8_t> line(static_cast<size_t>(row_len));
  for (int64_t yy = 0; yy < out_height; ++yy) {
    const uint8_t* out_row;
    if (v_identity) {
      out_row = hrows + yy * hstride;
    } else {
      std::fill(acc.begin(), acc.end(), 1 << (kPrecisionBits - 1));
      const int32_t* k = wy.weight.data() + yy * wy.taps;
      const int64_t y0 = wy.start[yy] - first_row;
      for (int y = 0; y < wy.count[yy]; ++y) {
        const uint8_t* r = hrows + (y0 + y) * hstride;
        const int32_t ky = k[y];
        int32_t* a = acc.data();
        for (int64_t i = 0; i < row_len; ++i) a[i] += r[i] * ky;
      }
      for (int64_t i = 0; i < row_len; ++i) line[i] = clip8(acc[i]);
      out_row = line.data();
    }
    uint8_t* d = dst + yy * row_step;
    if (px_step == C && ch_step == 1) {
      std::memcpy(d, out_row, static_cast<size_t>(row_len));
    } else {
      for (int64_t x = 0; x < out_width; ++x)
        for (int c = 0; c < C; ++c) d[x * px_step + c * ch_step] = out_row[x * C + c];
    }
  }
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
      resample_interleaved<1>(src + c * src_width * src_height, src_width, src_height, box, out_width,
                              out_height, dst + c * plane, out_width, 1, 0);
    return;
  }
  const bool planar_out = out_layout == PixelLayout::planar;
  const int64_t row_step = planar_out ? out_width : out_width * channels;
  const int64_t px_step = planar_out ? 1 : channels;
  const int64_t ch_step = planar_out ? plane : 1;
  switch (channels) {
    case 3:
      resample_interleaved<3>(src, src_width, src_height, box, out_width, out_height, dst, row_step, px_step, ch_step);
      return;
    case 4:
      resample_interleaved<4>(src, src_width, src_height, box, out_width, out_height, dst, row_step, px_step, ch_step);
      return;
    case 2:
      resample_interleaved<2>(src, src_width, src_height, box, out_width, out_height, dst, row_step, px_step, ch_step);
      return;
    default:
      CONVOY_CHECK(false, "resample: channels must be 1 to 4");
  }
}

void rgb_to_gray(const uint8_t* r, const uint8_t* g, const uint8_t* b, int64_t src_stride, int64_t pixels,
                 uint8_t* gray) {
  for (int64_t i = 0; i < pixels; ++i) {
    const int64_t o = i * src_stride;
    gray[i] = static_cast<uint8_t>((r[o] * 4899 + g[o] * 9617 + b[o] * 1868 + 8192) >> 14);
  }
}

}  // namespace convoy
