// Inverted dropout, forward and backward. The mask is a function of (seed, element index), so
// backends that run the same variant agree bit for bit. Inputs lie in [0.5, 1.5]: a zero in
// the result means dropped. Layout nchw only: the index is the element's place in memory.
#include <cmath>
#include <cstdio>
#include <memory>

#include "tests/ops/op_cases.h"

namespace convoy::optest {
namespace {

struct DropoutCase {
  const char* what;
  Shape shape;
  float p;
  uint64_t seed;
};

const DropoutCase kForward[] = {
    {"p0_3_seed42", {4, 50, 1000}, 0.3f, 42},  // 200,000 draws
    {"p0_3_seed43", {4, 50, 1000}, 0.3f, 43},  // another seed, another mask
    {"p0_identity", {4, 50, 1000}, 0.0f, 42},  // p = 0 keeps everything, unscaled
    {"p0_3_seed_c0ffee", {4, 37, 5, 3}, 0.3f, 0xC0FFEE},
};
const DropoutCase kBackward[] = {
    {"p0_3_seed42", {4, 50, 1000}, 0.3f, 42},
    {"p0_3_seed_c0ffee", {4, 37, 5, 3}, 0.3f, 0xC0FFEE},
};

// f32: one product with 1 / (1 - p) rounded to f32; bf16, f16: the result's rounding.
constexpr Tolerance kDropoutTol{1e-6, 1e-2, 2e-3};

std::string name(const char* op, const DropoutCase& c) { return std::string(op) + "/" + c.what + "_" + shape_name(c.shape); }

// The kept fraction within five standard deviations of 1 - p (the RNG draws uniformly).
std::string kept_fraction_ok(const Vec& y, float p) {
  int64_t kept = 0;
  for (double v : y) kept += v != 0.0;
  const double n = static_cast<double>(y.size()), fraction = static_cast<double>(kept) / n;
  const double sd = std::sqrt(static_cast<double>(p) * (1.0 - p) / n);
  if (std::fabs(fraction - (1.0 - p)) <= 5 * sd) return "";
  char buf[160];
  std::snprintf(buf, sizeof buf, "kept %.4f of the elements, expected %.4f +- %.4f", fraction, 1.0 - p, 5 * sd);
  return buf;
}

OpCase forward_case(const DropoutCase& c) {
  OpCase oc;
  oc.name = name("dropout_forward", c);
  oc.op = OpKind::dropout_forward;
  oc.tol = kDropoutTol;
  oc.prepare = [c](Backend& be, const Variant& v, DType values) {
    struct State { Tensor x, y; };
    auto s = std::make_shared<State>();
    s->x = device_tensor(be, random_values(c.shape, 71, values, 0.5, 1.5), c.shape, v.dtype);
    s->y = poisoned(be, c.shape, v.dtype);
    return Prepared{[&be, c, s] { be.ops().dropout_forward(c.p, c.seed, s->x, s->y); },
                    [s] { return Outputs{{"y", read(s->y), std::nullopt, /*same_bits=*/true}}; }};
  };
  oc.reference = [c](const Variant&, DType values) {
    return Outputs{{"y", ref::dropout_forward(c.p, c.seed, random_values(c.shape, 71, values, 0.5, 1.5))}};
  };
  oc.invariants = [c](const Outputs& got) { return kept_fraction_ok(got[0].values, c.p); };
  return oc;
}

OpCase backward_case(const DropoutCase& c) {
  OpCase oc;
  oc.name = name("dropout_backward", c);
  oc.op = OpKind::dropout_backward;
  oc.tol = kDropoutTol;
  oc.prepare = [c](Backend& be, const Variant& v, DType values) {
    struct State { Tensor dy, dx; };
    auto s = std::make_shared<State>();
    s->dy = device_tensor(be, random_values(c.shape, 72, values, 0.5, 1.5), c.shape, v.dtype);
    s->dx = poisoned(be, c.shape, v.dtype);
    return Prepared{[&be, c, s] { be.ops().dropout_backward(c.p, c.seed, s->dy, s->dx); },
                    [s] { return Outputs{{"dx", read(s->dx), std::nullopt, /*same_bits=*/true}}; }};
  };
  oc.reference = [c](const Variant&, DType values) {
    return Outputs{{"dx", ref::dropout_backward(c.p, c.seed, random_values(c.shape, 72, values, 0.5, 1.5))}};
  };
  return oc;
}

}  // namespace

std::vector<OpCase> dropout_cases() {
  std::vector<OpCase> cases;
  for (const DropoutCase& c : kForward) cases.push_back(forward_case(c));
  for (const DropoutCase& c : kBackward) cases.push_back(backward_case(c));
  return cases;
}

}  // namespace convoy::optest
