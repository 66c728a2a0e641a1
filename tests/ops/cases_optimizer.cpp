// The fused optimizer updates, several steps over several parameters at once (f32 master
// weights only): SGD (plain, weight decay, momentum, Nesterov) and AdamW on small shapes, and
// both on shapes that cross the fused kernels' chunk boundary (8192).
#include <cmath>
#include <memory>

#include "tests/ops/op_cases.h"

namespace convoy::optest {
namespace {

const std::vector<Shape> kSmallShapes{{5, 3}, {7}, {64, 33}};
const std::vector<Shape> kChunkedShapes{{7}, {100, 10}, {20001}, {3, 3, 3, 3}};

struct SgdCase {
  const char* what;
  std::vector<Shape> shapes;
  float momentum;
  bool nesterov;
  std::vector<float> weight_decay;  // per parameter (0 for a bias)
  int steps;
};

const SgdCase kSgd[] = {
    {"plain", kSmallShapes, 0.0f, false, {0.0f, 0.0f, 0.0f}, 5},
    {"weight_decay", kSmallShapes, 0.0f, false, {0.01f, 0.01f, 0.0f}, 5},
    {"momentum", kSmallShapes, 0.9f, false, {5e-4f, 5e-4f, 0.0f}, 5},
    {"nesterov", kSmallShapes, 0.9f, true, {5e-4f, 5e-4f, 0.0f}, 5},
    {"momentum_chunked", kChunkedShapes, 0.9f, false, {1e-2f, 0.0f, 1e-2f, 0.0f}, 5},
    {"nesterov_chunked", kChunkedShapes, 0.9f, true, {1e-2f, 0.0f, 1e-2f, 0.0f}, 5},
};

struct AdamCase {
  const char* what;
  std::vector<Shape> shapes;
  std::vector<float> weight_decay;
  int steps;
};

const AdamCase kAdam[] = {
    {"decay_per_parameter", kSmallShapes, {0.1f, 0.0f, 0.01f}, 6},
    {"chunked", kChunkedShapes, {0.05f, 0.0f, 0.05f, 0.0f}, 5},
};

// The same f32 arithmetic in every backend, a few steps deep; against the CPU tighter still.
constexpr Tolerance kOptimTol = uniform_tolerance(1e-5);
constexpr Tolerance kOptimVsCpu = uniform_tolerance(1e-6);

// Parameter i's initial values and step t's gradient.
Vec initial(const Shape& s, uint64_t base, size_t i) { return random_values(s, base + i, DType::f32); }
Vec gradient(const Shape& s, uint64_t base, int step, size_t i) {
  return random_values(s, base + 1000 * static_cast<uint64_t>(step) + i, DType::f32);
}

OpCase sgd_case(const SgdCase& c) {
  OpCase oc;
  oc.name = std::string("sgd_update/") + c.what;
  oc.op = OpKind::sgd_update;
  oc.dtypes = {DType::f32};
  oc.tol = kOptimTol;
  oc.vs_cpu = kOptimVsCpu;
  oc.prepare = [c](Backend& be, const Variant&, DType) {
    struct State { std::vector<Tensor> param, buf; std::vector<std::vector<Tensor>> grads; };
    auto s = std::make_shared<State>();
    s->grads.resize(static_cast<size_t>(c.steps));
    for (size_t i = 0; i < c.shapes.size(); ++i) {
      s->param.push_back(device_tensor(be, initial(c.shapes[i], 111, i), c.shapes[i], DType::f32));
      s->buf.push_back(device_tensor(be, Vec(static_cast<size_t>(numel(c.shapes[i])), 0.0), c.shapes[i], DType::f32));
      for (int t = 0; t < c.steps; ++t)
        s->grads[t].push_back(device_tensor(be, gradient(c.shapes[i], 120, t, i), c.shapes[i], DType::f32));
    }
    SgdHyper h;
    h.lr = 0.05f, h.momentum = c.momentum, h.nesterov = c.nesterov;
    return Prepared{[&be, c, s, h] {
                      for (int t = 0; t < c.steps; ++t) {
                        std::vector<SgdSlot> slots;
                        for (size_t i = 0; i < c.shapes.size(); ++i)
                          slots.push_back({&s->param[i], &s->grads[t][i], &s->buf[i], c.weight_decay[i]});
                        be.ops().sgd_update(slots, h);
                      }
                    },
                    [s] {
                      Outputs out;
                      for (size_t i = 0; i < s->param.size(); ++i) {
                        out.push_back({"param " + std::to_string(i), read(s->param[i])});
                        out.push_back({"momentum buffer " + std::to_string(i), read(s->buf[i])});
                      }
                      return out;
                    },
                    c.steps};
  };
  oc.reference = [c](const Variant&, DType) {
    SgdHyper h;
    h.lr = 0.05f, h.momentum = c.momentum, h.nesterov = c.nesterov;
    Outputs out;
    for (size_t i = 0; i < c.shapes.size(); ++i) {
      Vec p = initial(c.shapes[i], 111, i), buf(p.size(), 0.0);
      for (int t = 0; t < c.steps; ++t) ref::sgd_step(h, c.weight_decay[i], p, gradient(c.shapes[i], 120, t, i), buf);
      out.push_back({"param " + std::to_string(i), p});
      out.push_back({"momentum buffer " + std::to_string(i), buf});
    }
    return out;
  };
  return oc;
}

AdamHyper adam_hyper() {
  AdamHyper h;
  h.lr = 1e-2f, h.beta1 = 0.9f, h.beta2 = 0.999f, h.eps = 1e-8f;
  return h;
}

OpCase adamw_case(const AdamCase& c) {
  OpCase oc;
  oc.name = std::string("adamw_update/") + c.what;
  oc.op = OpKind::adamw_update;
  oc.dtypes = {DType::f32};
  oc.tol = kOptimTol;
  oc.vs_cpu = kOptimVsCpu;
  oc.prepare = [c](Backend& be, const Variant&, DType) {
    struct State { std::vector<Tensor> param, m, v; std::vector<std::vector<Tensor>> grads; int64_t step = 0; };
    auto s = std::make_shared<State>();
    s->grads.resize(static_cast<size_t>(c.steps));
    for (size_t i = 0; i < c.shapes.size(); ++i) {
      const Vec zero(static_cast<size_t>(numel(c.shapes[i])), 0.0);
      s->param.push_back(device_tensor(be, initial(c.shapes[i], 131, i), c.shapes[i], DType::f32));
      s->m.push_back(device_tensor(be, zero, c.shapes[i], DType::f32));
      s->v.push_back(device_tensor(be, zero, c.shapes[i], DType::f32));
      for (int t = 0; t < c.steps; ++t)
        s->grads[t].push_back(device_tensor(be, gradient(c.shapes[i], 140, t, i), c.shapes[i], DType::f32));
    }
    return Prepared{[&be, c, s] {
                      AdamHyper h = adam_hyper();
                      for (int t = 0; t < c.steps; ++t) {
                        h.step = ++s->step;  // 1-based, on across --perf's repeated runs
                        std::vector<AdamSlot> slots;
                        for (size_t i = 0; i < c.shapes.size(); ++i)
                          slots.push_back({&s->param[i], &s->grads[t][i], &s->m[i], &s->v[i], c.weight_decay[i]});
                        be.ops().adamw_update(slots, h);
                      }
                    },
                    [s] {
                      Outputs out;
                      for (size_t i = 0; i < s->param.size(); ++i) {
                        out.push_back({"param " + std::to_string(i), read(s->param[i])});
                        out.push_back({"m " + std::to_string(i), read(s->m[i])});
                        out.push_back({"v " + std::to_string(i), read(s->v[i])});
                      }
                      return out;
                    },
                    c.steps};
  };
  oc.reference = [c](const Variant&, DType) {
    Outputs out;
    for (size_t i = 0; i < c.shapes.size(); ++i) {
      Vec p = initial(c.shapes[i], 131, i), m(p.size(), 0.0), v(p.size(), 0.0);
      AdamHyper h = adam_hyper();
      for (int t = 0; t < c.steps; ++t) {
        h.step = t + 1;
        ref::adamw_step(h, c.weight_decay[i], p, gradient(c.shapes[i], 140, t, i), m, v);
      }
      out.push_back({"param " + std::to_string(i), p});
      out.push_back({"m " + std::to_string(i), m});
      out.push_back({"v " + std::to_string(i), v});
    }
    return out;
  };
  return oc;
}

// ---- the gradient statistics (grad_stats: non-finite count, sum of squares) -----------------

// Step t's gradient of parameter i for the statistics cases; with `plant`, a NaN, a +inf and a
// -inf in three steps and parameters, one of them past the kernels' first chunk.
Vec stats_gradient(const Shape& s, int step, size_t i, bool plant) {
  Vec g = gradient(s, 160, step, i);
  if (plant && step == 0 && i == 0) g[3] = std::nan("");
  if (plant && step == 1 && i == 2) g[9000] = INFINITY;
  if (plant && step == 2 && i == 1) g[999] = -INFINITY;
  return g;
}

// The statistics of `steps` steps of gradients, added up as the update adds them.
Vec stats_reference(const std::vector<Shape>& shapes, int steps, bool plant) {
  double bad = 0, sumsq = 0;
  for (int t = 0; t < steps; ++t)
    for (size_t i = 0; i < shapes.size(); ++i)
      for (double g : stats_gradient(shapes[i], t, i, plant)) {
        if (std::isfinite(g)) sumsq += g * g;
        else bad += 1;
      }
  return {bad, sumsq};
}

// `adam` or SGD with momentum over kChunkedShapes for 3 steps, grad_stats given. apply: the update
// and the statistics in its pass (finite gradients); else the statistics alone over planted
// non-finite gradients, and no parameter or state may change.
constexpr int kSteps = 3;  // of the statistics cases

OpCase grad_stats_case(bool adam, bool apply) {
  const std::vector<Shape> shapes = kChunkedShapes;
  const std::vector<float> wd{1e-2f, 0.0f, 1e-2f, 0.0f};
  const bool plant = !apply;
  OpCase oc;
  oc.name = std::string(adam ? "adamw_update/" : "sgd_update/") + (apply ? "gradient_stats" : "nonfinite_check_only");
  oc.op = adam ? OpKind::adamw_update : OpKind::sgd_update;
  oc.dtypes = {DType::f32};
  oc.tol = kOptimTol;  // sums of squares in other orders: no tighter bound against the CPU
  oc.prepare = [=](Backend& be, const Variant&, DType) {
    struct State { std::vector<Tensor> param, a, b; std::vector<std::vector<Tensor>> grads; Tensor stats; };
    auto s = std::make_shared<State>();
    s->grads.resize(kSteps);
    for (size_t i = 0; i < shapes.size(); ++i) {
      const Vec zero(static_cast<size_t>(numel(shapes[i])), 0.0);
      s->param.push_back(device_tensor(be, initial(shapes[i], 151, i), shapes[i], DType::f32));
      s->a.push_back(device_tensor(be, zero, shapes[i], DType::f32));
      s->b.push_back(device_tensor(be, zero, shapes[i], DType::f32));
      for (int t = 0; t < kSteps; ++t)
        s->grads[t].push_back(device_tensor(be, stats_gradient(shapes[i], t, i, plant), shapes[i], DType::f32));
    }
    s->stats = device_tensor(be, Vec{0.0, 0.0}, {2}, DType::f32);
    return Prepared{[&be, s, shapes, wd, adam, apply] {
                      for (int t = 0; t < kSteps; ++t) {
                        if (adam) {
                          AdamHyper h = adam_hyper();
                          h.step = t + 1, h.grad_stats = &s->stats, h.apply = apply;
                          std::vector<AdamSlot> slots;
                          for (size_t i = 0; i < shapes.size(); ++i)
                            slots.push_back({&s->param[i], &s->grads[t][i], &s->a[i], &s->b[i], wd[i]});
                          be.ops().adamw_update(slots, h);
                        } else {
                          SgdHyper h;
                          h.lr = 0.05f, h.momentum = 0.9f, h.grad_stats = &s->stats, h.apply = apply;
                          std::vector<SgdSlot> slots;
                          for (size_t i = 0; i < shapes.size(); ++i)
                            slots.push_back({&s->param[i], &s->grads[t][i], &s->a[i], wd[i]});
                          be.ops().sgd_update(slots, h);
                        }
                      }
                    },
                    [s] {
                      Outputs out{{"grad_stats", read(s->stats)}};
                      for (size_t i = 0; i < s->param.size(); ++i) {
                        out.push_back({"param " + std::to_string(i), read(s->param[i])});
                        out.push_back({"state a " + std::to_string(i), read(s->a[i])});
                        out.push_back({"state b " + std::to_string(i), read(s->b[i])});
                      }
                      return out;
                    },
                    kSteps};
  };
  oc.reference = [=](const Variant&, DType) {
    Outputs out{{"grad_stats", stats_reference(shapes, kSteps, plant)}};
    for (size_t i = 0; i < shapes.size(); ++i) {
      Vec p = initial(shapes[i], 151, i), a(p.size(), 0.0), b(p.size(), 0.0);
      for (int t = 0; apply && t < kSteps; ++t) {
        const Vec g = stats_gradient(shapes[i], t, i, plant);
        if (adam) {
          AdamHyper h = adam_hyper();
          h.step = t + 1;
          ref::adamw_step(h, wd[i], p, g, a, b);
        } else {
          SgdHyper h;
          h.lr = 0.05f, h.momentum = 0.9f;
          ref::sgd_step(h, wd[i], p, g, a);
        }
      }
      out.push_back({"param " + std::to_string(i), p});
      out.push_back({"state a " + std::to_string(i), a});
      out.push_back({"state b " + std::to_string(i), b});
    }
    return out;
  };
  return oc;
}

}  // namespace

std::vector<OpCase> optimizer_cases() {
  std::vector<OpCase> cases;
  for (const SgdCase& c : kSgd) cases.push_back(sgd_case(c));
  for (const AdamCase& c : kAdam) cases.push_back(adamw_case(c));
  for (bool adam : {false, true})
    for (bool apply : {true, false}) cases.push_back(grad_stats_case(adam, apply));
  return cases;
}

}  // namespace convoy::optest
