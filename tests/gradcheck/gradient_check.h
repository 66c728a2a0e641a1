#pragma once
// Finite-difference gradient checks: seeded inputs, and the comparison of an analytic
// gradient with central differences, element by element (all elements of a tensor up to
// kAllElements, else a seeded sample of kSampled plus the first and the last). Used by the
// layer and model gradient checks (tests/test_layer_gradients.cpp) on every backend.
//
// Values are perturbed in a host copy that the backend's copy follows (on the CPU the two are
// one tensor); L is read back and accumulated in double.
//
// Step and tolerance (both paths compute in f32):
// - h = 5e-3 on values of magnitude ~1. The divisor is the difference of the two perturbed
//   values as actually stored in f32, so the rounding of v +- h costs nothing.
// - Rounding noise: each output carries a few f32 ulps (~1e-7 relative), so over the few
//   hundred outputs of a check L(v + h) - L(v - h) is off by ~1e-7 and the quotient by ~2e-5
//   (the worst seen on the CPU, with CONVOY_GRADCHECK_VERBOSE=1, is |analytic - numeric| ~ 2e-5).
//   Truncation: h^2/6 |f'''| ~ 1e-5 for the smooth layers (GELU, batch norm), zero for the
//   piecewise-linear ones as long as no kink is crossed.
// - Hence |analytic - numeric| <= kLayerTol * max(1, |numeric|) with kLayerTol = 2e-3: ~100x
//   the observed error (room for other CPUs' kernels and cuDNN's summation orders), yet a gradient 5%
//   too large, or one element of the wrong sign, fails (LayerGradSelfTest checks exactly that).
// - Kinks are kept out of reach: ReLU / leaky ReLU inputs have |x| >= 0.1 >> h, ReLU6's and the
//   hard activations' are at least 0.1 from an integer, and pooling
//   inputs are distinct per (n, c) plane with gaps of >= 0.04 > 2h, so no perturbation changes
//   a window's argmax.
// The model test differentiates the mean cross-entropy, whose gradients are ~1e-2 and whose f32
// loss has ~1e-7 absolute noise; its bound is stated beside it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/core/tensor.h"

namespace convoy::gradcheck {

constexpr double kStep = 5e-3;
constexpr double kLayerTol = 2e-3;
constexpr int64_t kAllElements = 400;
constexpr int64_t kSampled = 60;

// True when CONVOY_GRADCHECK_VERBOSE is set: every check prints its worst error (for tuning).
bool verbose();

enum class Values {
  smooth,          // U(-1, 1)
  away_from_zero,  // +-U(0.1, 1): no ReLU kink within reach of h
  distinct,        // a shuffled ramp per (n, c) plane, gaps >= 0.04: no ties in a pool window
  off_integers,    // k + U(0.1, 0.9), k an integer in -8 ... 7: both sides of the kinks of relu6,
                   // hardsigmoid and hardswish (all at integers: -3, 0, 3, 6), none within reach of h
};

// n values of U(lo, hi) from `seed`.
std::vector<float> uniform(int64_t n, uint64_t seed, double lo = -1.0, double hi = 1.0);
// A CPU tensor of `shape` filled as `kind` says, from `seed`.
Tensor make_values(const Shape& shape, Values kind, uint64_t seed);
// y on any device, dotted with r in double.
double dot(const Tensor& y, const std::vector<float>& r);

struct Tolerance {
  double rel;    // |a - n| <= rel * max(floor, |n|) + abs
  double floor;
  double abs;
  bool ok(double analytic, double numeric) const {
    return std::fabs(analytic - numeric) <= rel * std::max(floor, std::fabs(numeric)) + abs;
  }
  double ratio(double analytic, double numeric) const {
    return std::fabs(analytic - numeric) / (rel * std::max(floor, std::fabs(numeric)) + abs);
  }
};
constexpr Tolerance kLayerTolerance{kLayerTol, 1.0, 0.0};

// An f32 tensor the loss reads, perturbed one element at a time in `host`; the backend's
// copy follows. On the CPU the two are one tensor.
struct Perturbable {
  Tensor host;
  Tensor device;
  explicit Perturbable(const Tensor& on_backend)
      : host(on_backend.device().is_cpu() ? on_backend : on_backend.to_cpu()), device(on_backend) {}
  float* values() { return host.data<float>(); }
  void sync() {
    if (!device.device().is_cpu()) device.copy_from(host);
  }
};

// Compares `analytic` (the gradient of loss() with respect to v's values) with central
// differences, perturbing one element at a time and restoring it.
::testing::AssertionResult matches_finite_differences(const std::string& what, Perturbable& v,
                                                      const std::vector<float>& analytic,
                                                      const std::function<double()>& loss,
                                                      const Tolerance& tol, double step = kStep);

}  // namespace convoy::gradcheck
