// The float64 reference of the elementwise ops, dropout, softmax, cast, the optimizer
// updates and the input pipeline.
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

// ---- activations ----------------------------------------------------------------------------

Vec activation_forward(Activation kind, double alpha, const Vec& x) {
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    switch (kind) {
      case Activation::relu: y[i] = v > 0 ? v : 0.0; break;
      case Activation::leaky_relu: y[i] = v > 0 ? v : alpha * v; break;
      case Activation::gelu: y[i] = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); break;
      case Activation::sigmoid: y[i] = 1.0 / (1.0 + std::exp(-v)); break;
      case Activation::silu: y[i] = v / (1.0 + std::exp(-v)); break;
      case Activation::hardsigmoid: y[i] = std::clamp(v / 6.0 + 0.5, 0.0, 1.0); break;
      case Activation::hardswish: y[i] = v * std::clamp(v / 6.0 + 0.5, 0.0, 1.0); break;
      case Activation::relu6: y[i] = std::clamp(v, 0.0, 6.0); break;
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
      case Activation::sigmoid: {
        const double sg = 1.0 / (1.0 + std::exp(-v));
        slope = sg * (1.0 - sg);
        break;
      }
      case Activation::silu: {
        const double sg = 1.0 / (1.0 + std::exp(-v));
        slope = sg + v * sg * (1.0 - sg);
        break;
      }
      case Activation::hardsigmoid: slope = v > -3.0 && v < 3.0 ? 1.0 / 6.0 : 0.0; break;
      case Activation::hardswish: slope = v <= -3.0 ? 0.0 : v >= 3.0 ? 1.0 : v / 3.0 + 0.5; break;  // oneDNN's side at the kinks
      case Activation::relu6: slope = v > 0.0 && v < 6.0 ? 1.0 : 0.0; break;
    }
    dx[i] = slope * dy[i];
  }
  return dx;
}

// ---- elementwise, concat and split ----------------------------------------------------------

Vec add(const Vec& a, const Vec& b) {
  require(a.size() == b.size(), "add: sizes differ");
  Vec y(a.size());
  for (size_t i = 0; i < a.size(); ++i) y[i] = a[i] + b[i];
  return y;
}

Vec channel_scale_forward(const Vec& x, const Shape& x_shape, const Vec& s) {
  require(x_shape.size() == 4 && static_cast<int64_t>(x.size()) == numel(x_shape), "channel_scale: x");
  const int64_t planes = x_shape[0] * x_shape[1], hw = x_shape[2] * x_shape[3];
  require(static_cast<int64_t>(s.size()) == planes, "channel_scale: one s per (n, c)");
  Vec y(x.size());
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t k = 0; k < hw; ++k) y[p * hw + k] = x[p * hw + k] * s[p];
  return y;
}

ChannelScaleGrads channel_scale_backward(const Vec& x, const Shape& x_shape, const Vec& s, const Vec& dy) {
  require(dy.size() == x.size(), "channel_scale_backward: dy like x");
  const int64_t planes = x_shape[0] * x_shape[1], hw = x_shape[2] * x_shape[3];
  ChannelScaleGrads g{channel_scale_forward(dy, x_shape, s), Vec(static_cast<size_t>(planes), 0.0)};
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t k = 0; k < hw; ++k) g.ds[p] += dy[p * hw + k] * x[p * hw + k];
  return g;
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
