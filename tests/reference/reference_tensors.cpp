// The reference's conversions to and from tensors, its seeded inputs and its error measure.
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


}  // namespace convoy::ref
