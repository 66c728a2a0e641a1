// The float64 reference of the softmax layer (over channels) and of nearest and bilinear
// upsampling, written from PyTorch's definitions (F.interpolate, align_corners=False) rather
// than from the backends: gather in forward, scatter in backward.
#include <algorithm>
#include <cmath>

#include "tests/reference/reference_internal.h"
#include "tests/reference/reference_ops.h"

namespace convoy::ref {

using detail::at4;
using detail::numel;
using detail::require;

namespace {

// (outer, C, inner) of a (N, C) or (N, C, H, W) shape.
void channel_geometry(const Shape& s, int64_t& outer, int64_t& c, int64_t& inner) {
  require(s.size() == 2 || s.size() == 4, "channel softmax wants (N, C) or (N, C, H, W)");
  outer = s[0], c = s[1], inner = s.size() == 4 ? s[2] * s[3] : 1;
}

// Output o's taps along one axis of `in` -> `out`: (index, weight) pairs.
struct Taps {
  int64_t i0, i1;
  double l0, l1;
};

Taps taps(UpsampleMode mode, int64_t o, int64_t in, int64_t out) {
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  if (mode == UpsampleMode::nearest) {
    const auto i = std::min(static_cast<int64_t>(std::floor(static_cast<double>(o) * scale)), in - 1);
    return {i, i, 1.0, 0.0};
  }
  const double src = std::max((static_cast<double>(o) + 0.5) * scale - 0.5, 0.0);
  const auto i0 = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
  const int64_t i1 = std::min(i0 + 1, in - 1);
  const double l1 = src - static_cast<double>(i0);
  return {i0, i1, 1.0 - l1, l1};
}

}  // namespace

Vec channel_softmax(const Vec& x, const Shape& shape) {
  int64_t outer, c, inner;
  channel_geometry(shape, outer, c, inner);
  require(static_cast<int64_t>(x.size()) == numel(shape), "channel softmax size");
  Vec y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return (o * c + k) * inner + i; };
      double m = x[at(0)];
      for (int64_t k = 0; k < c; ++k) m = std::max(m, x[at(k)]);
      double sum = 0;
      for (int64_t k = 0; k < c; ++k) sum += std::exp(x[at(k)] - m);
      for (int64_t k = 0; k < c; ++k) y[at(k)] = std::exp(x[at(k)] - m) / sum;
    }
  return y;
}

Vec channel_softmax_backward(const Vec& y, const Vec& dy, const Shape& shape) {
  int64_t outer, c, inner;
  channel_geometry(shape, outer, c, inner);
  require(y.size() == dy.size() && static_cast<int64_t>(y.size()) == numel(shape), "channel softmax backward size");
  Vec dx(y.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return (o * c + k) * inner + i; };
      double dot = 0;
      for (int64_t k = 0; k < c; ++k) dot += y[at(k)] * dy[at(k)];
      for (int64_t k = 0; k < c; ++k) dx[at(k)] = y[at(k)] * (dy[at(k)] - dot);
    }
  return dx;
}

Vec upsample_forward(UpsampleMode mode, const Vec& x, const Shape& xs, int64_t p, int64_t q) {
  require(xs.size() == 4 && static_cast<int64_t>(x.size()) == numel(xs), "upsample x");
  const Shape ys{xs[0], xs[1], p, q};
  Vec y(static_cast<size_t>(numel(ys)));
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t c = 0; c < xs[1]; ++c)
      for (int64_t oy = 0; oy < p; ++oy) {
        const Taps ty = taps(mode, oy, xs[2], p);
        for (int64_t ox = 0; ox < q; ++ox) {
          const Taps tx = taps(mode, ox, xs[3], q);
          auto v = [&](int64_t iy, int64_t ix) { return x[at4(xs, n, c, iy, ix)]; };
          y[at4(ys, n, c, oy, ox)] = ty.l0 * (tx.l0 * v(ty.i0, tx.i0) + tx.l1 * v(ty.i0, tx.i1)) +
                                     ty.l1 * (tx.l0 * v(ty.i1, tx.i0) + tx.l1 * v(ty.i1, tx.i1));
        }
      }
  return y;
}

Vec upsample_backward(UpsampleMode mode, const Vec& dy, const Shape& xs, int64_t p, int64_t q) {
  require(xs.size() == 4, "upsample x shape");
  const Shape ys{xs[0], xs[1], p, q};
  require(static_cast<int64_t>(dy.size()) == numel(ys), "upsample dy");
  Vec dx(static_cast<size_t>(numel(xs)), 0.0);
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t c = 0; c < xs[1]; ++c)
      for (int64_t oy = 0; oy < p; ++oy) {
        const Taps ty = taps(mode, oy, xs[2], p);
        for (int64_t ox = 0; ox < q; ++ox) {
          const Taps tx = taps(mode, ox, xs[3], q);
          const double g = dy[at4(ys, n, c, oy, ox)];
          dx[at4(xs, n, c, ty.i0, tx.i0)] += ty.l0 * tx.l0 * g;
          dx[at4(xs, n, c, ty.i0, tx.i1)] += ty.l0 * tx.l1 * g;
          dx[at4(xs, n, c, ty.i1, tx.i0)] += ty.l1 * tx.l0 * g;
          dx[at4(xs, n, c, ty.i1, tx.i1)] += ty.l1 * tx.l1 * g;
        }
      }
  return dx;
}

}  // namespace convoy::ref
