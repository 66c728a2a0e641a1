#include "tests/gradcheck/gradient_check.h"

#include <cstdlib>
#include <iostream>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

namespace convoy::gradcheck {

bool verbose() { return std::getenv("CONVOY_GRADCHECK_VERBOSE") != nullptr; }

std::vector<float> uniform(int64_t n, uint64_t seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(dist(rng));
  return v;
}

Tensor make_values(const Shape& shape, Values kind, uint64_t seed) {
  const int64_t n = shape_numel(shape);
  std::vector<float> v = uniform(n, seed);
  std::mt19937_64 rng(seed ^ 0x5eedull);
  if (kind == Values::away_from_zero) {
    for (float& x : v) x = (x < 0 ? -0.1f : 0.1f) + 0.9f * x;
  } else if (kind == Values::off_integers) {
    std::uniform_int_distribution<int> whole(-8, 7);
    for (float& x : v) x = static_cast<float>(whole(rng)) + 0.5f + 0.4f * x;
  } else if (kind == Values::distinct) {
    const int64_t plane = shape.size() >= 2 ? shape[shape.size() - 1] * shape[shape.size() - 2] : n;
    const double gap = std::max(0.04, 2.0 / static_cast<double>(plane));
    std::vector<int64_t> perm(static_cast<size_t>(plane));
    for (int64_t base = 0; base < n; base += plane) {
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      for (int64_t i = 0; i < plane; ++i)
        v[base + i] = static_cast<float>((static_cast<double>(perm[i]) - 0.5 * plane) * gap);
    }
  }
  return Tensor::from_floats(v, shape);
}

double dot(const Tensor& y, const std::vector<float>& r) {
  const std::vector<float> yv = y.to_floats();
  double s = 0;
  for (size_t i = 0; i < yv.size(); ++i) s += static_cast<double>(yv[i]) * r[i];
  return s;
}

namespace {

std::vector<int64_t> indices_to_check(int64_t n, uint64_t seed) {
  std::vector<int64_t> idx;
  if (n <= kAllElements) {
    idx.resize(static_cast<size_t>(n));
    std::iota(idx.begin(), idx.end(), 0);
    return idx;
  }
  std::set<int64_t> chosen{0, n - 1};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dist(0, n - 1);
  while (static_cast<int64_t>(chosen.size()) < kSampled + 2) chosen.insert(dist(rng));
  return {chosen.begin(), chosen.end()};
}

}  // namespace

::testing::AssertionResult matches_finite_differences(const std::string& what, Perturbable& v,
                                                      const std::vector<float>& analytic,
                                                      const std::function<double()>& loss,
                                                      const Tolerance& tol, double step) {
  const int64_t n = static_cast<int64_t>(analytic.size());
  float* values = v.values();
  int failures = 0;
  double worst_ratio = 0;
  std::ostringstream detail;
  for (int64_t i : indices_to_check(n, 0xC0FFEEull + static_cast<uint64_t>(n))) {
    const float original = values[i];
    const float up = static_cast<float>(original + step), down = static_cast<float>(original - step);
    values[i] = up;
    v.sync();
    const double loss_up = loss();
    values[i] = down;
    v.sync();
    const double loss_down = loss();
    values[i] = original;
    v.sync();
    const double numeric = (loss_up - loss_down) / (static_cast<double>(up) - static_cast<double>(down));
    const double a = analytic[static_cast<size_t>(i)];
    worst_ratio = std::max(worst_ratio, std::isfinite(a) ? tol.ratio(a, numeric) : INFINITY);
    if (!std::isfinite(a) || !tol.ok(a, numeric)) {
      if (++failures <= 8)
        detail << "\n  [" << i << "] analytic " << a << ", numeric " << numeric << ", diff "
               << a - numeric;
    }
  }
  if (verbose())
    std::cout << "  " << what << ": " << n << " elements, worst |a-n|/tol = " << worst_ratio << "\n";
  if (failures == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << failures << " element(s) differ from finite differences (tolerance "
         << tol.rel << " * max(" << tol.floor << ", |numeric|) + " << tol.abs << ", step " << step
         << "):" << detail.str();
}

}  // namespace convoy::gradcheck
