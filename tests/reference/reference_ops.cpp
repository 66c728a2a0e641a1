#include "tests/reference/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

#include "engine/core/counter_rng.h"

namespace convoy::ref {

namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("reference op: " + what);
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Row-major offset of (a, b, c, d) in a 4-D shape.
int64_t at4(const Shape& s, int64_t a, int64_t b, int64_t c, int64_t d) {
  return ((a * s[1] + b) * s[2] + c) * s[3] + d;
}

// The 4-D view of a batch-norm input: (N, C) is (N, C, 1, 1).
Shape as_nchw(const Shape& s) {
  require(s.size() == 4 || s.size() == 2, "batch norm input must be 2-D or 4-D");
  return s.size() == 4 ? s : Shape{s[0], s[1], 1, 1};
}

}  // namespace

// ---- conversions, inputs and comparison -----------------------------------------------------

Vec to_vec(const Tensor& t) {
  const std::vector<float> f = t.to_floats();
  return Vec(f.begin(), f.end());
}

Tensor to_tensor(const Vec& values, const Shape& shape, DType dtype) {
  require(static_cast<int64_t>(values.size()) == numel(shape), "value count does not match shape");
  Tensor t = Tensor::empty(shape, dtype);
  const size_t n = values.size();
  switch (dtype) {
    case DType::f32: {
      float* p = t.data<float>();
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(values[i]);
      break;
    }
    case DType::bf16:
    case DType::f16: {
      uint16_t* p = t.data<uint16_t>();
      for (size_t i = 0; i < n; ++i) {
        const float v = static_cast<float>(values[i]);
        p[i] = dtype == DType::bf16 ? float_to_bf16(v) : float_to_f16(v);
      }
      break;
    }
    case DType::i32: {
      int32_t* p = t.data<int32_t>();
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(std::lround(values[i]));
      break;
    }
    case DType::u8: {
      uint8_t* p = t.data<uint8_t>();
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(std::lround(values[i]));
      break;
    }
  }
  return t;
}

Vec random_vec(int64_t n, uint64_t seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  Vec v(static_cast<size_t>(n));
  for (double& x : v) x = dist(rng);
  return v;
}

std::vector<int32_t> random_ints(int64_t n, int32_t bound, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, bound - 1);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int32_t& x : v) x = dist(rng);
  return v;
}

double round_to(double value, DType dtype) {
  if (dtype == DType::f32) return static_cast<double>(static_cast<float>(value));
  require(dtype == DType::bf16 || dtype == DType::f16, "round_to: f32, bf16 or f16 only");
  if (std::isnan(value) || std::isinf(value) || value == 0.0) return value;
  // bits: significand precision including the hidden bit; emin: smallest normal exponent.
  const int bits = dtype == DType::bf16 ? 8 : 11;
  const int emin = dtype == DType::bf16 ? -126 : -14;
  const double max_finite = dtype == DType::bf16 ? std::ldexp(2.0 - std::ldexp(1.0, -7), 127)
                                                 : 65504.0;
  int e = 0;
  std::frexp(value, &e);  // value = m 2^e, 0.5 <= |m| < 1: the leading bit is 2^(e-1)
  const int quantum_exp = std::max(e, emin + 1) - bits;  // subnormals share the smallest quantum
  const double q = std::ldexp(1.0, quantum_exp);
  const double r = std::nearbyint(value / q) * q;  // default rounding: half to even
  if (std::fabs(r) > max_finite) return std::copysign(std::numeric_limits<double>::infinity(), value);
  return r;
}

double max_abs(const Vec& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

double max_relative_error(const Vec& actual, const Vec& expected) {
  const double inf = std::numeric_limits<double>::infinity();
  if (actual.size() != expected.size()) return inf;
  double worst = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::isnan(actual[i]) != std::isnan(expected[i])) return inf;
    if (std::isnan(actual[i])) continue;
    if (std::isinf(actual[i]) || std::isinf(expected[i])) {
      if (actual[i] != expected[i]) return inf;
      continue;
    }
    worst = std::max(worst, std::fabs(actual[i] - expected[i]));
  }
  const double scale = max_abs(expected);
  return scale > 0 ? worst / scale : worst;
}

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

// ---- activations ----------------------------------------------------------------------------

Vec activation_forward(Activation kind, double alpha, const Vec& x) {
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    switch (kind) {
      case Activation::relu: y[i] = v > 0 ? v : 0.0; break;
      case Activation::leaky_relu: y[i] = v > 0 ? v : alpha * v; break;
      case Activation::gelu: y[i] = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); break;
    }
  }
  return y;
}

Vec activation_backward(Activation kind, double alpha, const Vec& x, const Vec& dy) {
  const double pi = 3.14159265358979323846;
  Vec dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    double slope = 0;
    switch (kind) {
      case Activation::relu: slope = v > 0 ? 1.0 : 0.0; break;
      case Activation::leaky_relu: slope = v > 0 ? 1.0 : alpha; break;
      case Activation::gelu:
        slope = 0.5 * (1.0 + std::erf(v / std::sqrt(2.0))) +
                v * std::exp(-0.5 * v * v) / std::sqrt(2.0 * pi);
        break;
    }
    dx[i] = slope * dy[i];
  }
  return dx;
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

// ---- elementwise, concat and split ----------------------------------------------------------

Vec add(const Vec& a, const Vec& b) {
  require(a.size() == b.size(), "add: sizes differ");
  Vec y(a.size());
  for (size_t i = 0; i < a.size(); ++i) y[i] = a[i] + b[i];
  return y;
}

Vec concat_channels(const std::vector<Vec>& xs, const std::vector<Shape>& shapes) {
  require(!xs.empty() && xs.size() == shapes.size(), "concat_channels: parts and shapes");
  const int64_t N = shapes[0][0];
  const int64_t inner = numel(shapes[0]) / (shapes[0][0] * shapes[0][1]);
  Vec y;
  for (int64_t n = 0; n < N; ++n)
    for (size_t i = 0; i < xs.size(); ++i) {
      const int64_t chunk = shapes[i][1] * inner;  // one sample of part i
      for (int64_t j = 0; j < chunk; ++j) y.push_back(xs[i][n * chunk + j]);
    }
  return y;
}

std::vector<Vec> split_channels(const Vec& y, const Shape& ys,
                                const std::vector<int64_t>& channels) {
  const int64_t N = ys[0];
  const int64_t inner = numel(ys) / (ys[0] * ys[1]);
  std::vector<Vec> parts(channels.size());
  int64_t pos = 0;
  for (int64_t n = 0; n < N; ++n)
    for (size_t i = 0; i < channels.size(); ++i)
      for (int64_t j = 0; j < channels[i] * inner; ++j) parts[i].push_back(y[pos++]);
  require(pos == static_cast<int64_t>(y.size()), "split_channels: channels do not sum to C");
  return parts;
}

// ---- dropout --------------------------------------------------------------------------------

bool dropout_keeps(float p, uint64_t seed, int64_t i) {
  return counter_uniform(seed, static_cast<uint64_t>(i)) >= p;
}

Vec dropout_forward(float p, uint64_t seed, const Vec& x) {
  const double scale = p < 1.0f ? 1.0 / (1.0 - static_cast<double>(p)) : 0.0;
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    y[i] = dropout_keeps(p, seed, static_cast<int64_t>(i)) ? x[i] * scale : 0.0;
  return y;
}

Vec dropout_backward(float p, uint64_t seed, const Vec& dy) { return dropout_forward(p, seed, dy); }

// ---- softmax and cross-entropy --------------------------------------------------------------

Vec softmax(const Vec& logits, int64_t n, int64_t c) {
  Vec probs(logits.size());
  for (int64_t i = 0; i < n; ++i) {
    double zmax = logits[i * c];
    for (int64_t j = 0; j < c; ++j) zmax = std::max(zmax, logits[i * c + j]);
    double sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += std::exp(logits[i * c + j] - zmax);
    for (int64_t j = 0; j < c; ++j) probs[i * c + j] = std::exp(logits[i * c + j] - zmax) / sum;
  }
  return probs;
}

CrossEntropy softmax_cross_entropy(const Vec& logits, int64_t n, int64_t c,
                                   const std::vector<int32_t>& labels, double smoothing) {
  const Vec probs = softmax(logits, n, c);
  CrossEntropy out;
  out.dlogits.assign(logits.size(), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    double zmax = logits[i * c];
    for (int64_t j = 0; j < c; ++j) zmax = std::max(zmax, logits[i * c + j]);
    double sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += std::exp(logits[i * c + j] - zmax);
    int64_t arg = 0;
    for (int64_t j = 0; j < c; ++j) {
      const double target = (j == labels[i] ? 1.0 - smoothing : 0.0) + smoothing / c;
      const double log_p = logits[i * c + j] - zmax - std::log(sum);
      out.loss -= target * log_p / n;
      out.dlogits[i * c + j] = (probs[i * c + j] - target) / n;
      if (logits[i * c + j] > logits[i * c + arg]) arg = j;
    }
    if (arg == labels[i]) ++out.correct;
  }
  return out;
}

// ---- cast -----------------------------------------------------------------------------------

Vec cast(const Vec& x, DType to) {
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = round_to(x[i], to);
  return y;
}

// ---- optimizers -----------------------------------------------------------------------------

void sgd_step(const SgdHyper& h, double weight_decay, Vec& param, const Vec& grad,
              Vec& momentum_buf) {
  for (size_t i = 0; i < param.size(); ++i) {
    double g = grad[i] + weight_decay * param[i];
    momentum_buf[i] = h.momentum * momentum_buf[i] + g;
    g = h.nesterov ? g + h.momentum * momentum_buf[i] : momentum_buf[i];
    param[i] -= h.lr * g;
  }
}

void adamw_step(const AdamHyper& h, double weight_decay, Vec& param, const Vec& grad, Vec& m,
                Vec& v) {
  const double b1 = h.beta1, b2 = h.beta2, lr = h.lr;
  const double t = static_cast<double>(h.step);
  for (size_t i = 0; i < param.size(); ++i) {
    param[i] *= 1 - lr * weight_decay;
    m[i] = b1 * m[i] + (1 - b1) * grad[i];
    v[i] = b2 * v[i] + (1 - b2) * grad[i] * grad[i];
    const double m_hat = m[i] / (1 - std::pow(b1, t));
    const double v_hat = v[i] / (1 - std::pow(b2, t));
    param[i] -= lr * m_hat / (std::sqrt(v_hat) + h.eps);
  }
}

// ---- input pipeline -------------------------------------------------------------------------

AugmentDraw augment_draw(const NormalizeAugment& a, uint64_t seed, int64_t sample) {
  const uint64_t r = counter_hash(seed, static_cast<uint64_t>(sample));
  const uint64_t span = static_cast<uint64_t>(2 * a.crop_padding + 1);
  AugmentDraw d;
  d.dy = static_cast<int64_t>(r % span) - a.crop_padding;
  d.dx = static_cast<int64_t>((r >> 16) % span) - a.crop_padding;
  d.flip = a.horizontal_flip && ((r >> 32) & 1) == 1;
  return d;
}

Vec normalize_augment(const std::vector<uint8_t>& images, const Shape& s,
                      const NormalizeAugment& a, uint64_t seed) {
  require(s.size() == 4 && static_cast<int64_t>(images.size()) == numel(s),
          "normalize_augment: images must be (N, C, H, W)");
  const int64_t H = s[2], W = s[3];
  Vec y(images.size());
  for (int64_t n = 0; n < s[0]; ++n) {
    const AugmentDraw d = augment_draw(a, seed, n);
    for (int64_t c = 0; c < s[1]; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          // The flipped image F(h, w) = image(h, W - 1 - w), then cropped from zero padding.
          const int64_t fh = h + d.dy, fw = w + d.dx;
          double v = 0;
          if (fh >= 0 && fh < H && fw >= 0 && fw < W) {
            const int64_t src_w = d.flip ? W - 1 - fw : fw;
            v = images[at4(s, n, c, fh, src_w)];
          }
          y[at4(s, n, c, h, w)] = (v / 255.0 - a.mean[c]) / a.std[c];
        }
  }
  return y;
}

}  // namespace convoy::ref
