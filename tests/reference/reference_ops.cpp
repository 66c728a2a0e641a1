// The float64 reference of the spatial ops: convolution, batch norm, pooling, linear.
#include "tests/reference/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

#include "engine/core/counter_rng.h"

#include "tests/reference/reference_internal.h"

namespace convoy::ref {

using detail::at4;
using detail::numel;
using detail::require;

namespace {

// The 4-D view of a batch-norm input: (N, C) is (N, C, 1, 1).
Shape as_nchw(const Shape& s) {
  require(s.size() == 4 || s.size() == 2, "batch norm input must be 2-D or 4-D");
  return s.size() == 4 ? s : Shape{s[0], s[1], 1, 1};
}

}  // namespace

// ---- convolution ----------------------------------------------------------------------------

Shape conv2d_output_shape(const Conv2dParams& p, const Shape& xs, const Shape& ws) {
  require(xs.size() == 4 && ws.size() == 4, "conv2d expects 4-D x and w");
  const int64_t eff_r = p.dilation_h * (ws[2] - 1) + 1;
  const int64_t eff_s = p.dilation_w * (ws[3] - 1) + 1;
  const int64_t out_h = (xs[2] + 2 * p.pad_h - eff_r) / p.stride_h + 1;
  const int64_t out_w = (xs[3] + 2 * p.pad_w - eff_s) / p.stride_w + 1;
  return {xs[0], ws[0], out_h, out_w};
}

Vec conv2d_forward(const Conv2dParams& p, const Vec& x, const Shape& xs, const Vec& w,
                   const Shape& ws, const Vec* b) {
  const Shape ys = ref::conv2d_output_shape(p, xs, ws);
  const int64_t N = xs[0], H = xs[2], W = xs[3];
  const int64_t K = ws[0], Cg = ws[1], R = ws[2], S = ws[3];
  const int64_t Kg = K / p.groups;
  require(xs[1] == Cg * p.groups && K % p.groups == 0, "conv2d channels and groups disagree");
  Vec y(static_cast<size_t>(numel(ys)), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t g = k / Kg;
      for (int64_t oh = 0; oh < ys[2]; ++oh)
        for (int64_t ow = 0; ow < ys[3]; ++ow) {
          double sum = b ? (*b)[k] : 0.0;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t r = 0; r < R; ++r)
              for (int64_t s = 0; s < S; ++s) {
                const int64_t ih = oh * p.stride_h - p.pad_h + r * p.dilation_h;
                const int64_t iw = ow * p.stride_w - p.pad_w + s * p.dilation_w;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                sum += x[at4(xs, n, g * Cg + c, ih, iw)] * w[at4(ws, k, c, r, s)];
              }
          y[at4(ys, n, k, oh, ow)] = sum;
        }
    }
  return y;
}

Vec conv2d_backward_data(const Conv2dParams& p, const Vec& dy, const Shape& ys, const Vec& w,
                         const Shape& ws, const Shape& xs) {
  require(ref::conv2d_output_shape(p, xs, ws) == ys, "conv2d_backward_data: dy shape");
  const int64_t N = xs[0], H = xs[2], W = xs[3];
  const int64_t K = ws[0], Cg = ws[1], R = ws[2], S = ws[3];
  const int64_t Kg = K / p.groups;
  Vec dx(static_cast<size_t>(numel(xs)), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t g = k / Kg;
      for (int64_t oh = 0; oh < ys[2]; ++oh)
        for (int64_t ow = 0; ow < ys[3]; ++ow) {
          const double d = dy[at4(ys, n, k, oh, ow)];
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t r = 0; r < R; ++r)
              for (int64_t s = 0; s < S; ++s) {
                const int64_t ih = oh * p.stride_h - p.pad_h + r * p.dilation_h;
                const int64_t iw = ow * p.stride_w - p.pad_w + s * p.dilation_w;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                dx[at4(xs, n, g * Cg + c, ih, iw)] += d * w[at4(ws, k, c, r, s)];
              }
        }
    }
  return dx;
}

Vec conv2d_backward_weights(const Conv2dParams& p, const Vec& x, const Shape& xs, const Vec& dy,
                            const Shape& ys, const Shape& ws) {
  require(ref::conv2d_output_shape(p, xs, ws) == ys, "conv2d_backward_weights: dy shape");
  const int64_t N = xs[0], H = xs[2], W = xs[3];
  const int64_t K = ws[0], Cg = ws[1], R = ws[2], S = ws[3];
  const int64_t Kg = K / p.groups;
  Vec dw(static_cast<size_t>(numel(ws)), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t g = k / Kg;
      for (int64_t oh = 0; oh < ys[2]; ++oh)
        for (int64_t ow = 0; ow < ys[3]; ++ow) {
          const double d = dy[at4(ys, n, k, oh, ow)];
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t r = 0; r < R; ++r)
              for (int64_t s = 0; s < S; ++s) {
                const int64_t ih = oh * p.stride_h - p.pad_h + r * p.dilation_h;
                const int64_t iw = ow * p.stride_w - p.pad_w + s * p.dilation_w;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                dw[at4(ws, k, c, r, s)] += d * x[at4(xs, n, g * Cg + c, ih, iw)];
              }
        }
    }
  return dw;
}

Vec conv2d_backward_bias(const Vec& dy, const Shape& ys) {
  Vec db(static_cast<size_t>(ys[1]), 0.0);
  for (int64_t n = 0; n < ys[0]; ++n)
    for (int64_t k = 0; k < ys[1]; ++k)
      for (int64_t i = 0; i < ys[2]; ++i)
        for (int64_t j = 0; j < ys[3]; ++j) db[k] += dy[at4(ys, n, k, i, j)];
  return db;
}

// ---- batch norm -----------------------------------------------------------------------------

BatchNormTrain batchnorm_forward_train(const Vec& x, const Shape& shape, const Vec& gamma,
                                       const Vec& beta, double momentum, double eps,
                                       const Vec& running_mean, const Vec& running_var) {
  const Shape s = as_nchw(shape);
  const int64_t N = s[0], C = s[1], HW = s[2] * s[3];
  const double M = static_cast<double>(N * HW);
  BatchNormTrain out;
  out.y.assign(x.size(), 0.0);
  out.saved_mean.assign(C, 0.0);
  out.saved_invstd.assign(C, 0.0);
  out.running_mean = running_mean;
  out.running_var = running_var;
  for (int64_t c = 0; c < C; ++c) {
    double mean = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < HW; ++i) mean += x[(n * C + c) * HW + i];
    mean /= M;
    double var = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < HW; ++i) {
        const double d = x[(n * C + c) * HW + i] - mean;
        var += d * d;
      }
    const double unbiased = var / (M - 1);
    var /= M;
    const double invstd = 1.0 / std::sqrt(var + eps);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < HW; ++i) {
        const int64_t j = (n * C + c) * HW + i;
        out.y[j] = gamma[c] * (x[j] - mean) * invstd + beta[c];
      }
    out.saved_mean[c] = mean;
    out.saved_invstd[c] = invstd;
    out.running_mean[c] = (1 - momentum) * running_mean[c] + momentum * mean;
    out.running_var[c] = (1 - momentum) * running_var[c] + momentum * unbiased;
  }
  return out;
}

Vec batchnorm_forward_eval(const Vec& x, const Shape& shape, const Vec& gamma, const Vec& beta,
                           const Vec& running_mean, const Vec& running_var, double eps) {
  const Shape s = as_nchw(shape);
  const int64_t N = s[0], C = s[1], HW = s[2] * s[3];
  Vec y(x.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < HW; ++i) {
        const int64_t j = (n * C + c) * HW + i;
        y[j] = gamma[c] * (x[j] - running_mean[c]) / std::sqrt(running_var[c] + eps) + beta[c];
      }
  return y;
}

BatchNormGrads batchnorm_backward(const Vec& x, const Shape& shape, const Vec& dy,
                                  const Vec& gamma, const Vec& saved_mean,
                                  const Vec& saved_invstd) {
  const Shape s = as_nchw(shape);
  const int64_t N = s[0], C = s[1], HW = s[2] * s[3];
  const double M = static_cast<double>(N * HW);
  BatchNormGrads g;
  g.dx.assign(x.size(), 0.0);
  g.dgamma.assign(C, 0.0);
  g.dbeta.assign(C, 0.0);
  for (int64_t c = 0; c < C; ++c) {
    // y = gamma xhat + beta with xhat = (x - mean) invstd, mean and var over the batch:
    // dx = gamma invstd / M (M dy - sum dy - xhat sum(dy xhat)).
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < HW; ++i) {
        const int64_t j = (n * C + c) * HW + i;
        const double xhat = (x[j] - saved_mean[c]) * saved_invstd[c];
        sum_dy += dy[j];
        sum_dy_xhat += dy[j] * xhat;
      }
    g.dbeta[c] = sum_dy;
    g.dgamma[c] = sum_dy_xhat;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < HW; ++i) {
        const int64_t j = (n * C + c) * HW + i;
        const double xhat = (x[j] - saved_mean[c]) * saved_invstd[c];
        g.dx[j] = gamma[c] * saved_invstd[c] / M * (M * dy[j] - sum_dy - xhat * sum_dy_xhat);
      }
  }
  return g;
}

// ---- pooling --------------------------------------------------------------------------------

Shape pool2d_output_shape(const Pool2dParams& p, const Shape& xs) {
  require(xs.size() == 4, "pool2d expects a 4-D x");
  return {xs[0], xs[1], (xs[2] + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1,
          (xs[3] + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1};
}

Vec pool2d_forward(const Pool2dParams& p, const Vec& x, const Shape& xs) {
  const Shape ys = ref::pool2d_output_shape(p, xs);
  Vec y(static_cast<size_t>(numel(ys)));
  for (int64_t n = 0; n < ys[0]; ++n)
    for (int64_t c = 0; c < ys[1]; ++c)
      for (int64_t oh = 0; oh < ys[2]; ++oh)
        for (int64_t ow = 0; ow < ys[3]; ++ow) {
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          int64_t count = 0;
          for (int64_t r = 0; r < p.kernel_h; ++r)
            for (int64_t s = 0; s < p.kernel_w; ++s) {
              const int64_t ih = oh * p.stride_h - p.pad_h + r;
              const int64_t iw = ow * p.stride_w - p.pad_w + s;
              if (ih < 0 || ih >= xs[2] || iw < 0 || iw >= xs[3]) continue;
              const double v = x[at4(xs, n, c, ih, iw)];
              best = std::max(best, v);
              sum += v;
              ++count;
            }
          y[at4(ys, n, c, oh, ow)] = p.kind == PoolKind::max ? best : sum / count;
        }
  return y;
}

Vec pool2d_backward(const Pool2dParams& p, const Vec& x, const Shape& xs, const Vec& dy) {
  const Shape ys = ref::pool2d_output_shape(p, xs);
  Vec dx(x.size(), 0.0);
  for (int64_t n = 0; n < ys[0]; ++n)
    for (int64_t c = 0; c < ys[1]; ++c)
      for (int64_t oh = 0; oh < ys[2]; ++oh)
        for (int64_t ow = 0; ow < ys[3]; ++ow) {
          const double d = dy[at4(ys, n, c, oh, ow)];
          std::vector<int64_t> window;  // in-bounds input offsets, row-major
          for (int64_t r = 0; r < p.kernel_h; ++r)
            for (int64_t s = 0; s < p.kernel_w; ++s) {
              const int64_t ih = oh * p.stride_h - p.pad_h + r;
              const int64_t iw = ow * p.stride_w - p.pad_w + s;
              if (ih < 0 || ih >= xs[2] || iw < 0 || iw >= xs[3]) continue;
              window.push_back(at4(xs, n, c, ih, iw));
            }
          if (p.kind == PoolKind::max) {
            int64_t arg = window[0];
            for (int64_t j : window)
              if (x[j] > x[arg]) arg = j;
            dx[arg] += d;
          } else {
            for (int64_t j : window) dx[j] += d / static_cast<double>(window.size());
          }
        }
  return dx;
}

// ---- linear ---------------------------------------------------------------------------------

Vec linear_forward(const Vec& x, const Shape& xs, const Vec& w, const Shape& ws, const Vec* b) {
  require(xs.size() == 2 && ws.size() == 2 && xs[1] == ws[1], "linear shapes");
  const int64_t N = xs[0], K = xs[1], M = ws[0];
  Vec y(static_cast<size_t>(N * M));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      double sum = b ? (*b)[m] : 0.0;
      for (int64_t k = 0; k < K; ++k) sum += x[n * K + k] * w[m * K + k];
      y[n * M + m] = sum;
    }
  return y;
}

LinearGrads linear_backward(const Vec& x, const Shape& xs, const Vec& w, const Shape& ws,
                            const Vec& dy) {
  require(xs.size() == 2 && ws.size() == 2 && xs[1] == ws[1], "linear shapes");
  const int64_t N = xs[0], K = xs[1], M = ws[0];
  LinearGrads g;
  g.dx.assign(static_cast<size_t>(N * K), 0.0);
  g.dw.assign(static_cast<size_t>(M * K), 0.0);
  g.db.assign(static_cast<size_t>(M), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      const double d = dy[n * M + m];
      g.db[m] += d;
      for (int64_t k = 0; k < K; ++k) {
        g.dx[n * K + k] += d * w[m * K + k];
        g.dw[m * K + k] += d * x[n * K + k];
      }
    }
  return g;
}


}  // namespace convoy::ref
