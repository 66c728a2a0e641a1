// Batch norm: training forward (two steps, so the running statistics accumulate), inference
// forward, backward, on 4-D batches and (N, C), each shape with its eps.
// x, y, dy and dx take the variant's dtype and layout; gamma, beta and the statistics are f32.
#include <memory>

#include "tests/ops/op_cases.h"

namespace convoy::optest {
namespace {

struct BnShape {
  Shape x;  // (N, C, H, W) or (N, C)
  float eps;
  double lo, hi;  // the range of x
};

const BnShape kShapes[] = {
    // Values around 0.5 with spread 2, so mean and variance are both far from 0 and 1.
    {{4, 3, 5, 5}, 1e-5f, -0.5, 1.5},
    {{2, 8, 3, 3}, 1e-5f, -0.5, 1.5},
    // Two values per channel: dx = gamma invstd (dy1 - dy2) / 2 * eps / (var + eps) is a
    // cancellation that leaves ~eps/var of the terms' magnitude, beyond f32 at eps 1e-5; eps
    // 0.1 keeps the bound measuring the op rather than f32's conditioning.
    {{2, 4, 1, 1}, 0.1f, -0.5, 1.5},
    {{1, 2, 3, 1}, 1e-5f, -0.5, 1.5},  // batch 1, three values per channel
    {{6, 5}, 1e-3f, -0.5, 1.5},        // (N, C)
    {{8, 16, 7, 7}, 1e-5f, -0.5, 1.5},
    // eps far from cuDNN's default, so a backward that ignored the saved statistics would show.
    {{2, 3, 5, 7}, 1e-2f, -2.0, 3.0},
    {{1, 8, 4, 4}, 1e-2f, -2.0, 3.0},
    {{4, 16, 3, 3}, 1e-2f, -2.0, 3.0},
    {{3, 32, 8, 8}, 1e-2f, -2.0, 3.0},
    {{16, 64, 2, 2}, 1e-2f, -2.0, 3.0},
    {{8, 5}, 1e-2f, -2.0, 3.0},
    // the CUDA kernels' 16-byte vector paths (nhwc and (N, C), C a multiple of 8): channel
    // vectors that do not divide a block's 256 threads, more than 256 of them (blocks side by
    // side, the last one mostly idle), and rows over several reduction splits.
    {{64, 24, 8, 8}, 1e-5f, -0.5, 1.5},
    {{2, 2056, 2, 2}, 1e-5f, -0.5, 1.5},
    {{1024, 24}, 1e-5f, -0.5, 1.5},
    {{64, 8, 12, 12}, 1e-5f, -0.5, 1.5},  // nhwc: 36 splits, more than a finalize block's 32 rows
};

constexpr float kMomentum = 0.1f;

std::string case_name(const char* op, const BnShape& b, bool relu, bool residual) {
  std::string eps = b.eps == 1e-5f ? "" : b.eps == 1e-3f ? "_eps1e3" : b.eps == 1e-2f ? "_eps1e2" : "_eps1e1";
  return std::string(op) + "/" + shape_name(b.x) + eps + (residual ? "_residual" : "") + (relu ? "_relu" : "");
}

// The fused ReLU of the reference: max(y, 0), and dy zeroed where the pre-activation y <= 0.
Vec relu_of(Vec y) {
  for (double& v : y) v = v > 0 ? v : 0;
  return y;
}
// A residual join's add fused in: y + z, before the ReLU.
Vec plus(Vec y, const Vec& z) {
  for (size_t i = 0; i < y.size(); ++i) y[i] += z[i];
  return y;
}
Vec relu_masked(Vec dy, const Vec& pre) {
  for (size_t i = 0; i < dy.size(); ++i)
    if (!(pre[i] > 0)) dy[i] = 0;
  return dy;
}

struct BnData {
  int64_t c;
  Vec x1, x2, gamma, beta, rmean, rvar, dy, z;
  BnData(const BnShape& b, DType values)
      : c(b.x[1]),
        x1(random_values(b.x, 21, values, b.lo, b.hi)),
        x2(random_values(b.x, 26, values, 2 * b.lo, 2 * b.hi)),  // another batch, other statistics
        gamma(random_values({c}, 22, DType::f32, 0.5, 1.5)),
        beta(random_values({c}, 23, DType::f32, -0.5, 0.5)),
        rmean(random_values({c}, 24, DType::f32, -0.2, 0.2)),
        rvar(random_values({c}, 25, DType::f32, 0.5, 2.0)),
        dy(random_values(b.x, 27, values)),
        z(random_values(b.x, 28, values)) {}
};

// The f32 results of a bf16 or f16 run (statistics of exactly rounded inputs, summed in f32).
constexpr Tolerance kStatsTol = uniform_tolerance(1e-5);

OpCase base(const char* op_prefix, OpKind op, const BnShape& b, bool relu, bool residual = false) {
  OpCase oc;
  oc.name = case_name(op_prefix, b, relu, residual);
  oc.op = op;
  oc.layouts = b.x.size() == 4 ? std::vector<Layout>{Layout::nchw, Layout::nhwc} : std::vector<Layout>{Layout::nchw};
  return oc;
}

// Tensors of one training forward on a backend.
struct TrainState {
  Tensor x, gamma, beta, rmean, rvar, y, mean, invstd;
  Tensor z;  // the residual, where the case adds one
};

std::shared_ptr<TrainState> train_state(Backend& be, const BnShape& b, const BnData& d, const Vec& x,
                                        const Variant& v) {
  auto s = std::make_shared<TrainState>();
  s->x = device_tensor(be, x, b.x, v.dtype, v.layout);
  s->gamma = device_tensor(be, d.gamma, {d.c}, DType::f32);
  s->beta = device_tensor(be, d.beta, {d.c}, DType::f32);
  s->rmean = device_tensor(be, d.rmean, {d.c}, DType::f32);
  s->rvar = device_tensor(be, d.rvar, {d.c}, DType::f32);
  s->y = poisoned(be, b.x, v.dtype, v.layout);
  s->mean = poisoned(be, {d.c}, DType::f32);
  s->invstd = poisoned(be, {d.c}, DType::f32);
  return s;
}

void run_train(Backend& be, const BnShape& b, TrainState& s, bool relu) {
  be.ops().batchnorm_forward_train(s.x, s.gamma, s.beta, kMomentum, b.eps, s.rmean, s.rvar, s.y, s.mean,
                                   s.invstd, relu, s.z.defined() ? &s.z : nullptr);
}

OpCase train_case(const BnShape& b, bool relu, bool residual = false) {
  OpCase oc = base("batchnorm_forward_train", OpKind::batchnorm_forward_train, b, relu, residual);
  oc.prepare = [b, relu, residual](Backend& be, const Variant& v, DType values) {
    const BnData d(b, values);
    // Two steps on two batches; the second starts from the first's running statistics.
    auto s1 = train_state(be, b, d, d.x1, v);
    auto s2 = train_state(be, b, d, d.x2, v);
    if (residual) s1->z = s2->z = device_tensor(be, d.z, b.x, v.dtype, v.layout);
    s2->rmean = s1->rmean, s2->rvar = s1->rvar;
    return Prepared{[&be, b, s1, s2, relu] {
                      run_train(be, b, *s1, relu);
                      run_train(be, b, *s2, relu);
                    },
                    [s1, s2] {
                      // Read after both steps: the running statistics are those of step 2.
                      return Outputs{{"y (step 1)", read(s1->y)},
                                     {"saved_mean (step 1)", read(s1->mean), kStatsTol},
                                     {"saved_invstd (step 1)", read(s1->invstd), kStatsTol},
                                     {"y (step 2)", read(s2->y)},
                                     {"saved_mean (step 2)", read(s2->mean), kStatsTol},
                                     {"saved_invstd (step 2)", read(s2->invstd), kStatsTol},
                                     {"running_mean (unbiased, after 2 steps)", read(s2->rmean), kStatsTol},
                                     {"running_var (unbiased, after 2 steps)", read(s2->rvar), kStatsTol}};
                    },
                    2};
  };
  oc.reference = [b, relu, residual](const Variant&, DType values) {
    const BnData d(b, values);
    ref::BatchNormTrain r1 = ref::batchnorm_forward_train(d.x1, b.x, d.gamma, d.beta, kMomentum, b.eps, d.rmean,
                                                          d.rvar);
    ref::BatchNormTrain r2 = ref::batchnorm_forward_train(d.x2, b.x, d.gamma, d.beta, kMomentum, b.eps,
                                                          r1.running_mean, r1.running_var);
    if (residual) r1.y = plus(r1.y, d.z), r2.y = plus(r2.y, d.z);
    return Outputs{{"y (step 1)", relu ? relu_of(r1.y) : r1.y},
                   {"saved_mean (step 1)", r1.saved_mean},
                   {"saved_invstd (step 1)", r1.saved_invstd},
                   {"y (step 2)", relu ? relu_of(r2.y) : r2.y},
                   {"saved_mean (step 2)", r2.saved_mean},
                   {"saved_invstd (step 2)", r2.saved_invstd},
                   {"running_mean (unbiased, after 2 steps)", r2.running_mean},
                   {"running_var (unbiased, after 2 steps)", r2.running_var}};
  };
  return oc;
}

OpCase eval_case(const BnShape& b, bool relu, bool residual = false) {
  OpCase oc = base("batchnorm_forward_eval", OpKind::batchnorm_forward_eval, b, relu, residual);
  oc.prepare = [b, relu, residual](Backend& be, const Variant& v, DType values) {
    const BnData d(b, values);
    auto s = train_state(be, b, d, d.x2, v);
    if (residual) s->z = device_tensor(be, d.z, b.x, v.dtype, v.layout);
    return Prepared{[&be, b, s, relu] {
                      be.ops().batchnorm_forward_eval(s->x, s->gamma, s->beta, s->rmean, s->rvar, b.eps, s->y,
                                                      relu, s->z.defined() ? &s->z : nullptr);
                    },
                    [s] { return Outputs{{"y", read(s->y)}}; }};
  };
  oc.reference = [b, relu, residual](const Variant&, DType values) {
    const BnData d(b, values);
    Vec y = ref::batchnorm_forward_eval(d.x2, b.x, d.gamma, d.beta, d.rmean, d.rvar, b.eps);
    if (residual) y = plus(y, d.z);
    return Outputs{{"y", relu ? relu_of(y) : y}};
  };
  return oc;
}

// dx on the GPU: cuDNN's f32 backward sums in its own order (1e-4).
constexpr Tolerance kDxTol{1e-5, 2e-2, 5e-3, 1e-4};
// dgamma and dbeta (f32) of a bf16 or f16 run: sums of products of rounded dy and x-hat.
constexpr Tolerance kParamGradTol{1e-5, 1e-3, 1e-3};

// The saved statistics backward reads come from the backend's own training forward (run
// once in prepare, as a layer does); the reference uses its own.
// With relu, dy is the gradient of relu(bn(x)) and the op masks it itself.
OpCase backward_case(const BnShape& b, bool relu) {
  OpCase oc = base("batchnorm_backward", OpKind::batchnorm_backward, b, relu);
  oc.prepare = [b, relu](Backend& be, const Variant& v, DType values) {
    const BnData d(b, values);
    auto s = train_state(be, b, d, d.x1, v);
    run_train(be, b, *s, relu);
    struct Grads { Tensor dy, dx, dgamma, dbeta; };
    auto g = std::make_shared<Grads>();
    g->dy = device_tensor(be, d.dy, b.x, v.dtype, v.layout);
    g->dx = poisoned(be, b.x, v.dtype, v.layout);
    g->dgamma = poisoned(be, {d.c}, DType::f32);
    g->dbeta = poisoned(be, {d.c}, DType::f32);
    return Prepared{[&be, s, g, relu] {
                      be.ops().batchnorm_backward(s->x, g->dy, s->gamma, s->mean, s->invstd, g->dx, g->dgamma,
                                                  g->dbeta, relu ? &s->beta : nullptr);
                    },
                    [g] {
                      return Outputs{{"dx", read(g->dx), kDxTol},
                                     {"dgamma", read(g->dgamma), kParamGradTol},
                                     {"dbeta", read(g->dbeta), kParamGradTol}};
                    }};
  };
  oc.reference = [b, relu](const Variant&, DType values) {
    const BnData d(b, values);
    const ref::BatchNormTrain r = ref::batchnorm_forward_train(d.x1, b.x, d.gamma, d.beta, kMomentum, b.eps,
                                                               d.rmean, d.rvar);
    const ref::BatchNormGrads g = ref::batchnorm_backward(d.x1, b.x, relu ? relu_masked(d.dy, r.y) : d.dy, d.gamma,
                                                          r.saved_mean, r.saved_invstd);
    return Outputs{{"dx", g.dx}, {"dgamma", g.dgamma}, {"dbeta", g.dbeta}};
  };
  return oc;
}

}  // namespace

std::vector<OpCase> batchnorm_cases() {
  std::vector<OpCase> cases;
  for (bool relu : {false, true}) {
    for (const BnShape& b : kShapes) cases.push_back(train_case(b, relu));
    for (const BnShape& b : kShapes) cases.push_back(eval_case(b, relu));
    for (const BnShape& b : kShapes) cases.push_back(backward_case(b, relu));
    // A residual join's add fused in (Layer::forward_adding).
    for (const BnShape& b : kShapes) cases.push_back(train_case(b, relu, /*residual=*/true));
    for (const BnShape& b : kShapes) cases.push_back(eval_case(b, relu, /*residual=*/true));
  }
  return cases;
}

}  // namespace convoy::optest
