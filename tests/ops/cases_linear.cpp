// Linear (x w^T + b), forward and backward, with and without bias, from one row to 128 and
// one input feature to 256.
#include <memory>

#include "tests/ops/op_cases.h"

namespace convoy::optest {
namespace {

struct LinearShape {
  int64_t n, k, m;  // x (N, K), w (M, K), y (N, M)
  bool bias;
};

const LinearShape kShapes[] = {
    {4, 10, 6, true}, {1, 7, 3, false}, {33, 50, 17, true}, {5, 1, 2, true},
    {4, 7, 5, true}, {1, 16, 10, true}, {33, 64, 17, false}, {128, 256, 96, true},
};

std::string what(const LinearShape& c) {
  return "n" + std::to_string(c.n) + "_k" + std::to_string(c.k) + "_m" + std::to_string(c.m) +
         (c.bias ? "_bias" : "");
}

struct LinearData {
  Shape xs, ws, ys;
  Vec x, w, b, dy;
  LinearData(const LinearShape& c, DType values)
      : xs{c.n, c.k}, ws{c.m, c.k}, ys{c.n, c.m}, x(random_values(xs, 41, values)), w(random_values(ws, 42, values)),
        b(random_values({c.m}, 43, values)), dy(random_values(ys, 44, values)) {}
};

// GEMMs: cuBLAS sums f32 in its own order (1e-4 on the GPU).
constexpr Tolerance kLinearTol{1e-5, 2e-2, 5e-3, 1e-4};
// The bias gradient is a column sum of dy, in the same order everywhere.
constexpr Tolerance kBiasGradTol{1e-5, 2e-2, 5e-3, 1e-5};

OpCase forward_case(const LinearShape& c) {
  OpCase oc;
  oc.name = "linear_forward/" + what(c);
  oc.op = OpKind::linear_forward;
  oc.tol = kLinearTol;
  oc.prepare = [c](Backend& be, const Variant& v, DType values) {
    const LinearData d(c, values);
    struct State { Tensor x, w, b, y; };
    auto s = std::make_shared<State>();
    s->x = device_tensor(be, d.x, d.xs, v.dtype);
    s->w = device_tensor(be, d.w, d.ws, v.dtype);
    if (c.bias) s->b = device_tensor(be, d.b, {c.m}, v.dtype);
    s->y = poisoned(be, d.ys, v.dtype);
    return Prepared{[&be, s] { be.ops().linear_forward(s->x, s->w, s->b, s->y); },
                    [s] { return Outputs{{"y", read(s->y)}}; }};
  };
  oc.reference = [c](const Variant&, DType values) {
    const LinearData d(c, values);
    return Outputs{{"y", ref::linear_forward(d.x, d.xs, d.w, d.ws, c.bias ? &d.b : nullptr)}};
  };
  return oc;
}

// With dx, and without it (the first layer of a model needs none).
OpCase backward_case(const LinearShape& c) {
  OpCase oc;
  oc.name = "linear_backward/" + what(c);
  oc.op = OpKind::linear_backward;
  oc.tol = kLinearTol;
  oc.prepare = [c](Backend& be, const Variant& v, DType values) {
    const LinearData d(c, values);
    struct State { Tensor x, w, dy, dx, dw, db, no_dx, dw2, db2; };
    auto s = std::make_shared<State>();
    s->x = device_tensor(be, d.x, d.xs, v.dtype);
    s->w = device_tensor(be, d.w, d.ws, v.dtype);
    s->dy = device_tensor(be, d.dy, d.ys, v.dtype);
    s->dx = poisoned(be, d.xs, v.dtype);
    s->dw = poisoned(be, d.ws, v.dtype);
    s->dw2 = poisoned(be, d.ws, v.dtype);
    if (c.bias) s->db = poisoned(be, {c.m}, v.dtype), s->db2 = poisoned(be, {c.m}, v.dtype);
    return Prepared{[&be, s] { be.ops().linear_backward(s->x, s->w, s->dy, s->dx, s->dw, s->db); },
                    [&be, s] {
                      be.ops().linear_backward(s->x, s->w, s->dy, s->no_dx, s->dw2, s->db2);
                      Outputs out{{"dx", read(s->dx)}, {"dw", read(s->dw)}, {"dw (without dx)", read(s->dw2)}};
                      if (s->db.defined()) {
                        out.push_back({"db", read(s->db), kBiasGradTol});
                        out.push_back({"db (without dx)", read(s->db2), kBiasGradTol});
                      }
                      return out;
                    }};
  };
  oc.reference = [c](const Variant&, DType values) {
    const LinearData d(c, values);
    const ref::LinearGrads g = ref::linear_backward(d.x, d.xs, d.w, d.ws, d.dy);
    Outputs out{{"dx", g.dx}, {"dw", g.dw}, {"dw (without dx)", g.dw}};
    if (c.bias) out.push_back({"db", g.db}), out.push_back({"db (without dx)", g.db});
    return out;
  };
  return oc;
}

}  // namespace

std::vector<OpCase> linear_cases() {
  std::vector<OpCase> cases;
  for (const LinearShape& c : kShapes) cases.push_back(forward_case(c));
  for (const LinearShape& c : kShapes) cases.push_back(backward_case(c));
  return cases;
}

}  // namespace convoy::optest
