// Every CPU op, forward and backward, against the float64 reference in tests/reference/.
//
// Bounds: an f32 result passes when max|cpu - ref| / max|ref| <= 1e-5 (kF32Tol); results
// computed from bf16 values use 1e-2 (kBf16Tol). Outputs are pre-filled with NaN so an element
// an op forgets to write fails the comparison. Inputs are seeded uniform random values, never
// all zero.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/core/counter_rng.h"
#include "engine/core/error.h"
#include "tests/reference/reference_ops.h"

namespace convoy {
namespace {

using ref::Vec;

constexpr double kF32Tol = 1e-5;
constexpr double kBf16Tol = 1e-2;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

::testing::AssertionResult Close(const Vec& actual, const Vec& expected, double tol) {
  const double err = ref::max_relative_error(actual, expected);
  if (err <= tol) return ::testing::AssertionSuccess();
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << "size " << actual.size() << " != expected " << expected.size();
  size_t worst = 0;
  double worst_diff = -1;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double d = std::isnan(actual[i]) ? std::numeric_limits<double>::infinity()
                                           : std::fabs(actual[i] - expected[i]);
    if (d > worst_diff) {
      worst_diff = d;
      worst = i;
    }
  }
  return ::testing::AssertionFailure()
         << "relative error " << err << " > " << tol << "; worst at " << worst << ": got "
         << actual[worst] << ", want " << expected[worst] << " (max |ref| "
         << ref::max_abs(expected) << ")";
}

int64_t numel(const Shape& s) { return shape_numel(s); }

class CpuOpsTest : public ::testing::Test {
 protected:
  void SetUp() override { backend_ = make_cpu_backend({}); }
  Ops& ops() { return backend_->ops(); }
  // An output tensor whose every element is NaN until the op writes it.
  Tensor out(const Shape& shape, DType dtype = DType::f32) {
    Tensor t = backend_->empty(shape, dtype);
    if (dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16) ops().fill(t, kNaN);
    else std::memset(t.raw(), 0xAB, t.nbytes());
    return t;
  }
  std::unique_ptr<Backend> backend_;
};

// ---- convolution ----------------------------------------------------------------------------

struct ConvCase {
  const char* name;
  Shape x;  // (N, C, H, W)
  int64_t k, r, s;
  Conv2dParams p;
  bool bias;
};

void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }

Conv2dParams conv(int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw,
                  int64_t groups) {
  Conv2dParams p;
  p.stride_h = sh, p.stride_w = sw, p.pad_h = ph, p.pad_w = pw;
  p.dilation_h = dh, p.dilation_w = dw, p.groups = groups;
  return p;
}

class CpuOpsConv : public CpuOpsTest, public ::testing::WithParamInterface<ConvCase> {};

TEST_P(CpuOpsConv, ForwardAndBackwardMatchReference) {
  const ConvCase& c = GetParam();
  const Shape ws{c.k, c.x[1] / c.p.groups, c.r, c.s};
  const Shape ys = ref::conv2d_output_shape(c.p, c.x, ws);
  const Vec x = ref::random_vec(numel(c.x), 1);
  const Vec w = ref::random_vec(numel(ws), 2);
  const Vec b = ref::random_vec(c.k, 3);
  const Vec dy = ref::random_vec(numel(ys), 4);
  const Tensor tx = ref::to_tensor(x, c.x), tw = ref::to_tensor(w, ws), tdy = ref::to_tensor(dy, ys);
  const Tensor tb = c.bias ? ref::to_tensor(b, {c.k}) : Tensor();

  Tensor ty = out(ys);
  ops().conv2d_forward(c.p, tx, tw, tb, ty);
  EXPECT_TRUE(Close(ref::to_vec(ty), ref::conv2d_forward(c.p, x, c.x, w, ws, c.bias ? &b : nullptr),
                    kF32Tol))
      << "forward";

  Tensor tdx = out(c.x);
  ops().conv2d_backward_data(c.p, tdy, tw, tdx);
  EXPECT_TRUE(Close(ref::to_vec(tdx), ref::conv2d_backward_data(c.p, dy, ys, w, ws, c.x), kF32Tol))
      << "backward data";

  Tensor tdw = out(ws);
  Tensor tdb = c.bias ? out({c.k}) : Tensor();
  ops().conv2d_backward_weights(c.p, tx, tdy, tdw, tdb);
  EXPECT_TRUE(Close(ref::to_vec(tdw), ref::conv2d_backward_weights(c.p, x, c.x, dy, ys, ws), kF32Tol))
      << "backward weights";
  if (c.bias) {
    EXPECT_TRUE(Close(ref::to_vec(tdb), ref::conv2d_backward_bias(dy, ys), kF32Tol))
        << "backward bias";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CpuOpsConv,
    ::testing::Values(
        ConvCase{"basic3x3_pad1_bias", {2, 3, 8, 8}, 4, 3, 3, conv(1, 1, 1, 1, 1, 1, 1), true},
        ConvCase{"stride2_pad1_nonsquare", {1, 3, 9, 7}, 5, 3, 2, conv(2, 2, 1, 1, 1, 1, 1), false},
        ConvCase{"dilation2", {2, 2, 10, 9}, 3, 3, 3, conv(1, 1, 2, 2, 2, 2, 1), true},
        ConvCase{"groups2", {2, 4, 7, 7}, 6, 3, 3, conv(1, 1, 1, 1, 1, 1, 2), true},
        ConvCase{"depthwise_stride2", {2, 6, 8, 8}, 6, 3, 3, conv(2, 2, 1, 1, 1, 1, 6), false},
        ConvCase{"pointwise_batch1", {1, 8, 5, 5}, 4, 1, 1, conv(1, 1, 0, 0, 1, 1, 1), true},
        ConvCase{"lenet_5x5", {3, 1, 28, 28}, 6, 5, 5, conv(1, 1, 0, 0, 1, 1, 1), true},
        ConvCase{"mixed_stride_pad_dilation", {2, 3, 11, 10}, 4, 3, 3, conv(2, 1, 0, 2, 1, 2, 1),
                 true},
        ConvCase{"stride2_leftover", {2, 2, 8, 8}, 3, 3, 3, conv(2, 2, 0, 0, 1, 1, 1), true},
        ConvCase{"wide_channels", {2, 32, 6, 6}, 16, 3, 3, conv(1, 1, 1, 1, 1, 1, 1), true}),
    [](const ::testing::TestParamInfo<ConvCase>& info) { return std::string(info.param.name); });

// ---- pooling --------------------------------------------------------------------------------

struct PoolCase {
  const char* name;
  Shape x;
  Pool2dParams p;
};

void PrintTo(const PoolCase& c, std::ostream* os) { *os << c.name; }

Pool2dParams pool(PoolKind kind, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                  int64_t pw) {
  Pool2dParams p;
  p.kind = kind, p.kernel_h = kh, p.kernel_w = kw, p.stride_h = sh, p.stride_w = sw;
  p.pad_h = ph, p.pad_w = pw;
  return p;
}

class CpuOpsPool : public CpuOpsTest, public ::testing::WithParamInterface<PoolCase> {};

TEST_P(CpuOpsPool, ForwardAndBackwardMatchReference) {
  const PoolCase& c = GetParam();
  const Shape ys = ref::pool2d_output_shape(c.p, c.x);
  const Vec x = ref::random_vec(numel(c.x), 11);
  const Vec dy = ref::random_vec(numel(ys), 12);
  const Tensor tx = ref::to_tensor(x, c.x), tdy = ref::to_tensor(dy, ys);
  const Vec y_ref = ref::pool2d_forward(c.p, x, c.x);
  const Vec dx_ref = ref::pool2d_backward(c.p, x, c.x, dy);

  Tensor ty = out(ys), workspace;
  ops().pool2d_forward(c.p, tx, ty, workspace, /*training=*/true);
  EXPECT_TRUE(Close(ref::to_vec(ty), y_ref, kF32Tol)) << "training forward";
  if (c.p.kind == PoolKind::max) {
    ASSERT_TRUE(workspace.defined()) << "max pooling keeps its argmax record";
    EXPECT_EQ(workspace.dtype(), DType::u8);
  }

  Tensor ty_eval = out(ys), no_workspace;
  ops().pool2d_forward(c.p, tx, ty_eval, no_workspace, /*training=*/false);
  EXPECT_TRUE(Close(ref::to_vec(ty_eval), y_ref, kF32Tol)) << "inference forward";

  Tensor tdx = out(c.x);
  ops().pool2d_backward(c.p, tx, ty, tdy, workspace, tdx);
  EXPECT_TRUE(Close(ref::to_vec(tdx), dx_ref, kF32Tol)) << "backward with the workspace";

  // Without the forward's record the backend must rebuild it from x.
  Tensor tdx2 = out(c.x);
  ops().pool2d_backward(c.p, tx, ty, tdy, Tensor(), tdx2);
  EXPECT_TRUE(Close(ref::to_vec(tdx2), dx_ref, kF32Tol)) << "backward without a workspace";
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CpuOpsPool,
    ::testing::Values(
        PoolCase{"max2x2", {2, 3, 8, 8}, pool(PoolKind::max, 2, 2, 2, 2, 0, 0)},
        PoolCase{"max3x3_s2_pad1_overlap", {2, 2, 9, 7}, pool(PoolKind::max, 3, 3, 2, 2, 1, 1)},
        PoolCase{"max3x3_s1_pad1_batch1", {1, 3, 6, 5}, pool(PoolKind::max, 3, 3, 1, 1, 1, 1)},
        PoolCase{"max2x2_leftover", {2, 2, 7, 7}, pool(PoolKind::max, 2, 2, 2, 2, 0, 0)},
        PoolCase{"max2x3_s1x2_pad0x1", {1, 2, 6, 9}, pool(PoolKind::max, 2, 3, 1, 2, 0, 1)},
        PoolCase{"avg2x2", {2, 3, 8, 8}, pool(PoolKind::avg, 2, 2, 2, 2, 0, 0)},
        PoolCase{"avg3x3_s2_pad1_exclude_padding", {2, 2, 9, 7},
                 pool(PoolKind::avg, 3, 3, 2, 2, 1, 1)},
        PoolCase{"avg3x2_s2x1_pad1x0", {1, 2, 7, 6}, pool(PoolKind::avg, 3, 2, 2, 1, 1, 0)},
        PoolCase{"avg_global", {2, 4, 5, 5}, pool(PoolKind::avg, 5, 5, 1, 1, 0, 0)}),
    [](const ::testing::TestParamInfo<PoolCase>& info) { return std::string(info.param.name); });

// ---- batch norm -----------------------------------------------------------------------------

struct BnCase {
  Shape x;
  float eps;
};

void PrintTo(const BnCase& c, std::ostream* os) { *os << shape_str(c.x) << " eps " << c.eps; }

class CpuOpsBatchNorm : public CpuOpsTest, public ::testing::WithParamInterface<BnCase> {};

TEST_P(CpuOpsBatchNorm, TrainEvalBackwardAndRunningStats) {
  const Shape xs = GetParam().x;
  const int64_t c = xs[1];
  const float momentum = 0.1f, eps = GetParam().eps;
  // Values around 0.5 with spread 2, so mean and variance are both far from 0 and 1.
  Vec x = ref::random_vec(numel(xs), 21, -0.5, 1.5);
  const Vec gamma = ref::random_vec(c, 22, 0.5, 1.5), beta = ref::random_vec(c, 23, -0.5, 0.5);
  Vec rmean = ref::random_vec(c, 24, -0.2, 0.2), rvar = ref::random_vec(c, 25, 0.5, 1.5);
  const Tensor tgamma = ref::to_tensor(gamma, {c}), tbeta = ref::to_tensor(beta, {c});
  Tensor trmean = ref::to_tensor(rmean, {c}), trvar = ref::to_tensor(rvar, {c});

  for (int step = 0; step < 2; ++step) {
    if (step == 1) x = ref::random_vec(numel(xs), 26, -1.0, 3.0);
    const Tensor tx = ref::to_tensor(x, xs);
    Tensor ty = out(xs), tmean = out({c}), tinvstd = out({c});
    ops().batchnorm_forward_train(tx, tgamma, tbeta, momentum, eps, trmean, trvar, ty, tmean,
                                  tinvstd);
    const ref::BatchNormTrain r =
        ref::batchnorm_forward_train(x, xs, gamma, beta, momentum, eps, rmean, rvar);
    EXPECT_TRUE(Close(ref::to_vec(ty), r.y, kF32Tol)) << "y, step " << step;
    EXPECT_TRUE(Close(ref::to_vec(tmean), r.saved_mean, kF32Tol)) << "saved_mean";
    EXPECT_TRUE(Close(ref::to_vec(tinvstd), r.saved_invstd, kF32Tol)) << "saved_invstd";
    EXPECT_TRUE(Close(ref::to_vec(trmean), r.running_mean, kF32Tol)) << "running_mean";
    EXPECT_TRUE(Close(ref::to_vec(trvar), r.running_var, kF32Tol)) << "running_var (unbiased)";
    rmean = r.running_mean;
    rvar = r.running_var;

    const Vec dy = ref::random_vec(numel(xs), 27 + step);
    Tensor tdx = out(xs), tdgamma = out({c}), tdbeta = out({c});
    ops().batchnorm_backward(tx, ref::to_tensor(dy, xs), tgamma, tmean, tinvstd, tdx, tdgamma,
                             tdbeta);
    const ref::BatchNormGrads g =
        ref::batchnorm_backward(x, xs, dy, gamma, r.saved_mean, r.saved_invstd);
    EXPECT_TRUE(Close(ref::to_vec(tdx), g.dx, kF32Tol)) << "dx";
    EXPECT_TRUE(Close(ref::to_vec(tdgamma), g.dgamma, kF32Tol)) << "dgamma";
    EXPECT_TRUE(Close(ref::to_vec(tdbeta), g.dbeta, kF32Tol)) << "dbeta";
  }

  const Vec xe = ref::random_vec(numel(xs), 29, -2.0, 2.0);
  Tensor tye = out(xs);
  ops().batchnorm_forward_eval(ref::to_tensor(xe, xs), tgamma, tbeta, trmean, trvar, eps, tye);
  EXPECT_TRUE(Close(ref::to_vec(tye),
                    ref::batchnorm_forward_eval(xe, xs, gamma, beta, rmean, rvar, eps), kF32Tol))
      << "eval";
}

// With two values per channel, dx = gamma invstd (dy1 - dy2) / 2 * eps / (var + eps) is a
// cancellation that leaves ~eps/var of the terms' magnitude, beyond f32 at eps 1e-5; that case
// uses eps 0.1 so the bound still measures the op rather than f32's conditioning.
INSTANTIATE_TEST_SUITE_P(Shapes, CpuOpsBatchNorm,
                         ::testing::Values(BnCase{{4, 3, 5, 5}, 1e-5f}, BnCase{{2, 8, 3, 3}, 1e-5f},
                                           BnCase{{2, 4, 1, 1}, 0.1f},   // N*H*W = 2
                                           BnCase{{1, 2, 3, 1}, 1e-5f},  // batch 1, N*H*W = 3
                                           BnCase{{6, 5}, 1e-3f},        // (N, C)
                                           BnCase{{8, 16, 7, 7}, 1e-5f}),
                         [](const ::testing::TestParamInfo<BnCase>& info) {
                           std::string name;
                           for (int64_t d : info.param.x) name += (name.empty() ? "" : "x") + std::to_string(d);
                           return name;
                         });

TEST_F(CpuOpsTest, BatchNormNeedsTwoValuesPerChannel) {
  const Tensor x = ref::to_tensor(ref::random_vec(3, 1), {1, 3});
  Tensor g = ref::to_tensor({1, 1, 1}, {3}), b = ref::to_tensor({0, 0, 0}, {3});
  Tensor rm = ref::to_tensor({0, 0, 0}, {3}), rv = ref::to_tensor({1, 1, 1}, {3});
  Tensor y = out({1, 3}), m = out({3}), s = out({3});
  EXPECT_THROW(ops().batchnorm_forward_train(x, g, b, 0.1f, 1e-5f, rm, rv, y, m, s), InputError);
}

// ---- activations ----------------------------------------------------------------------------

TEST_F(CpuOpsTest, ActivationsMatchReference) {
  for (const Shape& xs : {Shape{3, 4, 5, 6}, Shape{7}, Shape{2, 33}}) {
    const Vec x = ref::random_vec(numel(xs), 31, -3.0, 3.0);
    const Vec dy = ref::random_vec(numel(xs), 32);
    const Tensor tx = ref::to_tensor(x, xs), tdy = ref::to_tensor(dy, xs);
    for (Activation kind : {Activation::relu, Activation::leaky_relu, Activation::gelu}) {
      const float alpha = kind == Activation::leaky_relu ? 0.1f : 0.0f;
      SCOPED_TRACE("activation " + std::to_string(static_cast<int>(kind)) + " shape " + shape_str(xs));
      Tensor ty = out(xs);
      ops().activation_forward(kind, alpha, tx, ty);
      EXPECT_TRUE(Close(ref::to_vec(ty), ref::activation_forward(kind, alpha, x), kF32Tol));
      Tensor tdx = out(xs);
      ops().activation_backward(kind, alpha, tx, ty, tdy, tdx);
      EXPECT_TRUE(Close(ref::to_vec(tdx), ref::activation_backward(kind, alpha, x, dy), kF32Tol));
    }
  }
}

// ---- linear ---------------------------------------------------------------------------------

TEST_F(CpuOpsTest, LinearMatchesReference) {
  struct Case {
    int64_t n, k, m;
    bool bias, want_dx;
  };
  for (const Case& c : {Case{4, 10, 6, true, true}, Case{1, 7, 3, false, true},
                        Case{33, 50, 17, true, false}, Case{5, 1, 2, true, true}}) {
    SCOPED_TRACE("linear " + std::to_string(c.n) + "x" + std::to_string(c.k) + " -> " + std::to_string(c.m));
    const Shape xs{c.n, c.k}, ws{c.m, c.k}, ys{c.n, c.m};
    const Vec x = ref::random_vec(numel(xs), 41), w = ref::random_vec(numel(ws), 42);
    const Vec b = ref::random_vec(c.m, 43), dy = ref::random_vec(numel(ys), 44);
    const Tensor tx = ref::to_tensor(x, xs), tw = ref::to_tensor(w, ws);
    Tensor ty = out(ys);
    ops().linear_forward(tx, tw, c.bias ? ref::to_tensor(b, {c.m}) : Tensor(), ty);
    EXPECT_TRUE(Close(ref::to_vec(ty), ref::linear_forward(x, xs, w, ws, c.bias ? &b : nullptr), kF32Tol));

    Tensor tdx = c.want_dx ? out(xs) : Tensor(), tdw = out(ws), tdb = c.bias ? out({c.m}) : Tensor();
    ops().linear_backward(tx, tw, ref::to_tensor(dy, ys), tdx, tdw, tdb);
    const ref::LinearGrads g = ref::linear_backward(x, xs, w, ws, dy);
    if (c.want_dx) {
      EXPECT_TRUE(Close(ref::to_vec(tdx), g.dx, kF32Tol)) << "dx";
    }
    EXPECT_TRUE(Close(ref::to_vec(tdw), g.dw, kF32Tol)) << "dw";
    if (c.bias) {
      EXPECT_TRUE(Close(ref::to_vec(tdb), g.db, kF32Tol)) << "db";
    }
  }
}

// ---- add, concat, split ---------------------------------------------------------------------

TEST_F(CpuOpsTest, AddAndAddInplace) {
  for (const Shape& s : {Shape{3, 4, 5}, Shape{2, 64, 16, 16}}) {
    const Vec a = ref::random_vec(numel(s), 51), b = ref::random_vec(numel(s), 52);
    Tensor ty = out(s);
    ops().add(ref::to_tensor(a, s), ref::to_tensor(b, s), ty);
    EXPECT_TRUE(Close(ref::to_vec(ty), ref::add(a, b), kF32Tol));
    Tensor acc = ref::to_tensor(a, s);
    ops().add_inplace(acc, ref::to_tensor(b, s));
    ops().add_inplace(acc, ref::to_tensor(b, s));
    EXPECT_TRUE(Close(ref::to_vec(acc), ref::add(ref::add(a, b), b), kF32Tol));
  }
}

TEST_F(CpuOpsTest, ConcatAndSplitChannels) {
  for (const std::vector<Shape>& shapes :
       {std::vector<Shape>{{2, 1, 3, 4}, {2, 3, 3, 4}, {2, 2, 3, 4}},
        std::vector<Shape>{{3, 2}, {3, 5}}}) {
    std::vector<Vec> parts;
    std::vector<Tensor> tensors;
    Shape ys = shapes[0];
    ys[1] = 0;
    std::vector<int64_t> channels;
    for (size_t i = 0; i < shapes.size(); ++i) {
      parts.push_back(ref::cast(ref::random_vec(numel(shapes[i]), 61 + i), DType::f32));
      tensors.push_back(ref::to_tensor(parts.back(), shapes[i]));
      ys[1] += shapes[i][1];
      channels.push_back(shapes[i][1]);
    }
    Tensor ty = out(ys);
    ops().concat_channels(tensors, ty);
    const Vec y_ref = ref::concat_channels(parts, shapes);
    EXPECT_TRUE(Close(ref::to_vec(ty), y_ref, 0.0)) << "concat of " << shapes.size() << " parts";

    std::vector<Tensor> back;
    for (const Shape& s : shapes) back.push_back(out(s));
    ops().split_channels(ref::to_tensor(y_ref, ys), back);
    const std::vector<Vec> split_ref = ref::split_channels(y_ref, ys, channels);
    for (size_t i = 0; i < back.size(); ++i) {
      EXPECT_TRUE(Close(ref::to_vec(back[i]), split_ref[i], 0.0)) << "split part " << i;
      EXPECT_TRUE(Close(split_ref[i], parts[i], 0.0)) << "reference round trip " << i;
    }
  }
}

// ---- dropout --------------------------------------------------------------------------------

TEST_F(CpuOpsTest, DropoutKeepsOneMinusPAndBackwardReusesTheMask) {
  const float p = 0.3f;
  const uint64_t seed = 42;
  const Shape s{4, 50, 1000};
  const Vec x = ref::random_vec(numel(s), 71, 0.5, 1.5);  // never 0, so y == 0 means dropped
  Tensor ty = out(s);
  ops().dropout_forward(p, seed, ref::to_tensor(x, s), ty);
  const Vec y = ref::to_vec(ty);
  EXPECT_TRUE(Close(y, ref::dropout_forward(p, seed, x), kF32Tol));
  int64_t kept = 0;
  for (double v : y) kept += v != 0.0;
  const double fraction = static_cast<double>(kept) / static_cast<double>(y.size());
  // 200,000 Bernoulli(0.7) draws: the standard deviation of the fraction is about 0.001.
  EXPECT_NEAR(fraction, 1.0 - p, 0.01);

  const Vec dy = ref::random_vec(numel(s), 72, 0.5, 1.5);
  Tensor tdx = out(s);
  ops().dropout_backward(p, seed, ref::to_tensor(dy, s), tdx);
  const Vec dx = ref::to_vec(tdx);
  EXPECT_TRUE(Close(dx, ref::dropout_backward(p, seed, dy), kF32Tol));
  int64_t mismatched = 0;
  for (size_t i = 0; i < dx.size(); ++i) mismatched += (dx[i] != 0.0) != (y[i] != 0.0);
  EXPECT_EQ(mismatched, 0) << "backward must drop exactly the elements forward dropped";

  Tensor ty2 = out(s);
  ops().dropout_forward(p, seed + 1, ref::to_tensor(x, s), ty2);
  const Vec y2 = ref::to_vec(ty2);
  int64_t differ = 0;
  for (size_t i = 0; i < y.size(); ++i) differ += (y[i] != 0.0) != (y2[i] != 0.0);
  EXPECT_GT(differ, 1000) << "another seed must draw another mask";

  Tensor ty0 = out(s);
  ops().dropout_forward(0.0f, seed, ref::to_tensor(x, s), ty0);
  EXPECT_TRUE(Close(ref::to_vec(ty0), ref::cast(x, DType::f32), 0.0)) << "p = 0 is the identity";
}

// ---- softmax and cross-entropy --------------------------------------------------------------

struct CeCase {
  int64_t n, c;
  double scale;  // logit magnitude
  float smoothing;
};

TEST_F(CpuOpsTest, SoftmaxCrossEntropyMatchesReference) {
  for (const CeCase& k : {CeCase{7, 10, 3.0, 0.0f}, CeCase{7, 10, 3.0, 0.1f},
                          CeCase{64, 10, 2.0, 0.1f}, CeCase{5, 3, 1000.0, 0.0f},
                          CeCase{5, 3, 1000.0, 0.2f}, CeCase{1, 100, 5.0, 0.1f}}) {
    SCOPED_TRACE("N " + std::to_string(k.n) + " C " + std::to_string(k.c) + " scale " +
                 std::to_string(k.scale) + " smoothing " + std::to_string(k.smoothing));
    Vec logits = ref::random_vec(k.n * k.c, 81, -k.scale, k.scale);
    const std::vector<int32_t> labels = ref::random_ints(k.n, static_cast<int32_t>(k.c), 82);
    // Make every other sample right so `correct` is neither 0 nor N.
    for (int64_t i = 0; i < k.n; i += 2) logits[i * k.c + labels[i]] += 2 * k.scale;
    logits = ref::cast(logits, DType::f32);
    const ref::CrossEntropy r = ref::softmax_cross_entropy(logits, k.n, k.c, labels, k.smoothing);
    const Tensor tlogits = ref::to_tensor(logits, {k.n, k.c});
    const Tensor tlabels = Tensor::from_ints(labels, {k.n});

    Tensor loss = out({1}), dlogits = out({k.n, k.c}), correct = out({1}, DType::i32);
    ops().softmax_cross_entropy(tlogits, tlabels, k.smoothing, loss, dlogits, correct);
    EXPECT_TRUE(Close(ref::to_vec(loss), {r.loss}, kF32Tol)) << "loss";
    EXPECT_TRUE(Close(ref::to_vec(dlogits), r.dlogits, kF32Tol)) << "dlogits";
    EXPECT_EQ(correct.data<int32_t>()[0], r.correct);
    EXPECT_GT(r.correct, 0);

    // Without dlogits: the same loss and count.
    Tensor loss2 = out({1}), none, correct2 = out({1}, DType::i32);
    ops().softmax_cross_entropy(tlogits, tlabels, k.smoothing, loss2, none, correct2);
    EXPECT_TRUE(Close(ref::to_vec(loss2), {r.loss}, kF32Tol));
    EXPECT_EQ(correct2.data<int32_t>()[0], r.correct);

    Tensor probs = out({k.n, k.c});
    ops().softmax(tlogits, probs);
    EXPECT_TRUE(Close(ref::to_vec(probs), ref::softmax(logits, k.n, k.c), kF32Tol)) << "softmax";
  }
}

TEST_F(CpuOpsTest, SoftmaxCrossEntropyAcceptsBf16Logits) {
  const int64_t n = 16, c = 10;
  const Tensor tlogits = ref::to_tensor(ref::random_vec(n * c, 91, -4, 4), {n, c}, DType::bf16);
  const Vec logits = ref::to_vec(tlogits);  // the bf16 values themselves
  const std::vector<int32_t> labels = ref::random_ints(n, c, 92);
  const ref::CrossEntropy r = ref::softmax_cross_entropy(logits, n, c, labels, 0.1);
  Tensor loss = out({1}), dlogits = out({n, c}, DType::bf16), correct = out({1}, DType::i32);
  ops().softmax_cross_entropy(tlogits, Tensor::from_ints(labels, {n}), 0.1f, loss, dlogits, correct);
  EXPECT_TRUE(Close(ref::to_vec(loss), {r.loss}, kF32Tol));
  EXPECT_TRUE(Close(ref::to_vec(dlogits), r.dlogits, kBf16Tol));
  EXPECT_EQ(correct.data<int32_t>()[0], r.correct);
  Tensor probs = out({n, c});
  ops().softmax(tlogits, probs);
  EXPECT_TRUE(Close(ref::to_vec(probs), ref::softmax(logits, n, c), kF32Tol));
}

TEST_F(CpuOpsTest, SoftmaxCrossEntropyRejectsBadLabels) {
  const Tensor logits = ref::to_tensor(ref::random_vec(6, 93), {2, 3});
  Tensor loss = out({1}), dlogits = out({2, 3}), correct = out({1}, DType::i32);
  EXPECT_THROW(ops().softmax_cross_entropy(logits, Tensor::from_ints({0, 3}, {2}), 0.0f, loss,
                                           dlogits, correct),
               InputError);
  EXPECT_THROW(ops().softmax_cross_entropy(logits, Tensor::from_ints({-1, 0}, {2}), 0.0f, loss,
                                           dlogits, correct),
               InputError);
}

// ---- cast and fill --------------------------------------------------------------------------

TEST_F(CpuOpsTest, CastConvertsBetweenNchwAndNhwc) {
  const Shape s{2, 3, 4, 5};
  const int64_t C = 3, H = 4, W = 5;
  const Vec x = ref::cast(ref::random_vec(shape_numel(s), 107, -2.0, 2.0), DType::f32);
  Tensor nhwc = Tensor::empty(s, DType::bf16).with_layout(Layout::nhwc);
  ops().cast(ref::to_tensor(x, s), nhwc);
  const Vec got = ref::to_vec(nhwc);  // memory order: (n, h, w, c)
  const Vec want = ref::cast(x, DType::bf16);
  int64_t wrong = 0;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          wrong += !(got[((n * H + h) * W + w) * C + c] == want[((n * C + c) * H + h) * W + w]);
  EXPECT_EQ(wrong, 0) << "nchw f32 -> nhwc bf16";
  Tensor back = out(s);
  ops().cast(nhwc, back);
  EXPECT_EQ(ref::to_vec(back), want) << "nhwc bf16 -> nchw f32";
}

TEST_F(CpuOpsTest, CastRoundsLikeTheReferenceAndRoundTrips) {
  Vec x = ref::random_vec(4096, 101, -1.0, 1.0);
  for (size_t i = 0; i < x.size(); ++i) x[i] *= std::pow(10.0, static_cast<double>(i % 13) - 8.0);
  // Edges: zeros, f16's largest finite and overflow, f16 subnormals, bf16 and f16 ties.
  for (double v : {0.0, -0.0, 65504.0, 70000.0, -1e6, 1e-7, 3e-8, 1.0 + 1.0 / 256, 1.0 + 3.0 / 256,
                   1.0 + 1.0 / 2048, 3e38, 1e-40})
    x.push_back(v);
  x = ref::cast(x, DType::f32);
  const Shape s{static_cast<int64_t>(x.size())};
  const Tensor tx = ref::to_tensor(x, s);
  for (DType to : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(std::string(dtype_name(to)));
    Tensor ty = out(s, to);
    ops().cast(tx, ty);
    const Vec rounded = ref::cast(x, to);
    const Vec got = ref::to_vec(ty);
    int64_t wrong = 0;
    for (size_t i = 0; i < x.size(); ++i) wrong += !(got[i] == rounded[i]);
    EXPECT_EQ(wrong, 0) << "f32 -> " << dtype_name(to) << " must round to nearest even";
    Tensor back = out(s);
    ops().cast(ty, back);
    const Vec b = ref::to_vec(back);
    wrong = 0;
    for (size_t i = 0; i < x.size(); ++i) wrong += !(b[i] == rounded[i]);
    EXPECT_EQ(wrong, 0) << dtype_name(to) << " -> f32 must be exact";
  }
  // f16 -> bf16 goes through the value, rounded once more.
  Tensor h = out(s, DType::f16), hb = out(s, DType::bf16);
  ops().cast(tx, h);
  ops().cast(h, hb);
  const Vec hv = ref::to_vec(h), want = ref::cast(hv, DType::bf16), got = ref::to_vec(hb);
  int64_t wrong = 0;
  for (size_t i = 0; i < hv.size(); ++i) wrong += !(got[i] == want[i]);
  EXPECT_EQ(wrong, 0);
}

TEST_F(CpuOpsTest, FillEveryDtype) {
  const Shape s{3, 70000};
  Tensor f = out(s);
  ops().fill(f, 2.5f);
  EXPECT_EQ(ref::to_vec(f), Vec(numel(s), 2.5));
  Tensor b = out(s, DType::bf16);
  ops().fill(b, 0.1f);
  EXPECT_EQ(ref::to_vec(b), Vec(numel(s), ref::round_to(0.1f, DType::bf16)));
  Tensor i = out(s, DType::i32);
  ops().fill(i, -7.0f);
  EXPECT_EQ(ref::to_vec(i), Vec(numel(s), -7.0));
  Tensor u = out(s, DType::u8);
  ops().fill(u, 200.0f);
  EXPECT_EQ(ref::to_vec(u), Vec(numel(s), 200.0));
}

// ---- optimizers -----------------------------------------------------------------------------

TEST_F(CpuOpsTest, SgdMatchesReferenceOverSeveralSteps) {
  struct Case {
    const char* name;
    float momentum;
    bool nesterov;
    float weight_decay;
  };
  const std::vector<Shape> shapes{{5, 3}, {7}, {64, 33}};
  for (const Case& c : {Case{"plain", 0.0f, false, 0.0f}, Case{"weight_decay", 0.0f, false, 0.01f},
                        Case{"momentum", 0.9f, false, 5e-4f}, Case{"nesterov", 0.9f, true, 5e-4f}}) {
    SCOPED_TRACE(c.name);
    SgdHyper h;
    h.lr = 0.05f, h.momentum = c.momentum, h.nesterov = c.nesterov;
    std::vector<Vec> p, buf;
    std::vector<Tensor> tp, tg, tbuf;
    for (size_t i = 0; i < shapes.size(); ++i) {
      p.push_back(ref::random_vec(numel(shapes[i]), 111 + i));
      buf.emplace_back(numel(shapes[i]), 0.0);
      tp.push_back(ref::to_tensor(p.back(), shapes[i]));
      tbuf.push_back(Tensor::zeros(shapes[i]));
      tg.push_back(Tensor());
    }
    for (int step = 0; step < 5; ++step) {
      std::vector<SgdSlot> slots;
      std::vector<Vec> g;
      for (size_t i = 0; i < shapes.size(); ++i) {
        g.push_back(ref::random_vec(numel(shapes[i]), 1000 * step + 120 + i));
        tg[i] = ref::to_tensor(g.back(), shapes[i]);
        // The last parameter is a bias: no weight decay.
        const float wd = i + 1 == shapes.size() ? 0.0f : c.weight_decay;
        slots.push_back(SgdSlot{&tp[i], &tg[i], &tbuf[i], wd});
        ref::sgd_step(h, wd, p[i], g.back(), buf[i]);
      }
      ops().sgd_update(slots, h);
    }
    for (size_t i = 0; i < shapes.size(); ++i) {
      EXPECT_TRUE(Close(ref::to_vec(tp[i]), p[i], kF32Tol)) << "param " << i;
      EXPECT_TRUE(Close(ref::to_vec(tbuf[i]), buf[i], kF32Tol)) << "momentum buffer " << i;
    }
  }
}

TEST_F(CpuOpsTest, AdamWMatchesReferenceOverSeveralSteps) {
  const std::vector<Shape> shapes{{5, 3}, {7}, {64, 33}};
  const float wds[] = {0.1f, 0.0f, 0.01f};
  AdamHyper h;
  h.lr = 1e-2f, h.beta1 = 0.9f, h.beta2 = 0.999f, h.eps = 1e-8f;
  std::vector<Vec> p, m, v;
  std::vector<Tensor> tp, tg(shapes.size()), tm, tv;
  for (size_t i = 0; i < shapes.size(); ++i) {
    p.push_back(ref::random_vec(numel(shapes[i]), 131 + i));
    m.emplace_back(numel(shapes[i]), 0.0);
    v.emplace_back(numel(shapes[i]), 0.0);
    tp.push_back(ref::to_tensor(p.back(), shapes[i]));
    tm.push_back(Tensor::zeros(shapes[i]));
    tv.push_back(Tensor::zeros(shapes[i]));
  }
  for (int step = 1; step <= 6; ++step) {
    h.step = step;
    std::vector<AdamSlot> slots;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const Vec g = ref::random_vec(numel(shapes[i]), 1000 * step + 140 + i);
      tg[i] = ref::to_tensor(g, shapes[i]);
      slots.push_back(AdamSlot{&tp[i], &tg[i], &tm[i], &tv[i], wds[i]});
      ref::adamw_step(h, wds[i], p[i], g, m[i], v[i]);
    }
    ops().adamw_update(slots, h);
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    EXPECT_TRUE(Close(ref::to_vec(tp[i]), p[i], kF32Tol)) << "param " << i;
    EXPECT_TRUE(Close(ref::to_vec(tm[i]), m[i], kF32Tol)) << "m " << i;
    EXPECT_TRUE(Close(ref::to_vec(tv[i]), v[i], kF32Tol)) << "v " << i;
  }
}

// ---- input normalization and augmentation ---------------------------------------------------

TEST_F(CpuOpsTest, NormalizeAugmentFollowsTheCropFlipRecipe) {
  const Shape s{32, 3, 8, 6};
  const uint64_t seed = 7;
  std::vector<uint8_t> images;
  for (int32_t v : ref::random_ints(numel(s), 256, 151)) images.push_back(static_cast<uint8_t>(v));
  Tensor timages = Tensor::empty(s, DType::u8);
  std::memcpy(timages.raw(), images.data(), images.size());
  NormalizeAugment a;
  a.mean[0] = 0.5f, a.mean[1] = 0.4f, a.mean[2] = 0.3f;
  a.std[0] = 0.2f, a.std[1] = 0.25f, a.std[2] = 0.3f;
  a.crop_padding = 2;
  a.horizontal_flip = true;

  // The recipe draws must exercise flips, non-flips and both signs of offsets in this batch.
  int flips = 0, shifted = 0, negative = 0;
  for (int64_t n = 0; n < s[0]; ++n) {
    const ref::AugmentDraw d = ref::augment_draw(a, seed, n);
    flips += d.flip;
    shifted += d.dy != 0 || d.dx != 0;
    negative += d.dy < 0 || d.dx < 0;
    EXPECT_LE(std::abs(d.dy), 2);
    EXPECT_LE(std::abs(d.dx), 2);
  }
  EXPECT_GT(flips, 0);
  EXPECT_LT(flips, s[0]);
  EXPECT_GT(shifted, 0);
  EXPECT_GT(negative, 0);

  Tensor y = out(s);
  ops().normalize_augment(timages, a, seed, y);
  EXPECT_TRUE(Close(ref::to_vec(y), ref::normalize_augment(images, s, a, seed), kF32Tol));

  Tensor yb = out(s, DType::bf16);
  ops().normalize_augment(timages, a, seed, yb);
  EXPECT_TRUE(Close(ref::to_vec(yb), ref::normalize_augment(images, s, a, seed), kBf16Tol));

  NormalizeAugment plain = a;
  plain.crop_padding = 0;
  plain.horizontal_flip = false;
  Tensor yp = out(s);
  ops().normalize_augment(timages, plain, seed, yp);
  Vec want(images.size());
  const int64_t plane = s[2] * s[3];
  for (size_t i = 0; i < images.size(); ++i) {
    const int64_t c = (static_cast<int64_t>(i) / plane) % s[1];
    want[i] = (images[i] / 255.0 - plain.mean[c]) / plain.std[c];
  }
  EXPECT_TRUE(Close(ref::to_vec(yp), want, kF32Tol)) << "no augmentation = plain normalization";
}

// ---- backend, caching, errors ---------------------------------------------------------------

TEST_F(CpuOpsTest, BackendDescribesItself) {
  EXPECT_TRUE(backend_->device().is_cpu());
  EXPECT_EQ(backend_->allocator().get(), cpu_allocator().get());
  const std::string d = backend_->describe();
  EXPECT_EQ(d.rfind("cpu: oneDNN ", 0), 0u) << d;
  EXPECT_NE(d.find(" threads, "), std::string::npos) << d;
  EXPECT_FALSE(cpu_doctor_lines().empty());
  backend_->synchronize();
}

TEST_F(CpuOpsTest, CachedPrimitivesKeepShapesApart) {
  // Interleave two shapes (and a bias / no-bias variant) so a key collision shows up.
  const Conv2dParams p = conv(1, 1, 1, 1, 1, 1, 1);
  for (int round = 0; round < 2; ++round)
    for (const Shape& xs : {Shape{2, 3, 8, 8}, Shape{2, 3, 6, 6}, Shape{1, 3, 8, 8}}) {
      const Shape ws{4, 3, 3, 3};
      const Shape ys = ref::conv2d_output_shape(p, xs, ws);
      const Vec x = ref::random_vec(numel(xs), 161 + round), w = ref::random_vec(numel(ws), 162);
      const Vec b = ref::random_vec(4, 163);
      Tensor y = out(ys);
      const bool bias = xs[2] == 8;
      ops().conv2d_forward(p, ref::to_tensor(x, xs), ref::to_tensor(w, ws),
                           bias ? ref::to_tensor(b, {4}) : Tensor(), y);
      EXPECT_TRUE(Close(ref::to_vec(y), ref::conv2d_forward(p, x, xs, w, ws, bias ? &b : nullptr),
                        kF32Tol))
          << shape_str(xs) << " round " << round;
    }
}

TEST_F(CpuOpsTest, SingleThreadGivesTheSameResults) {
  BackendOptions one;
  one.threads = 1;
  auto single = make_cpu_backend(one);
  EXPECT_NE(single->describe().find(" 1 threads"), std::string::npos) << single->describe();
  const Conv2dParams p = conv(1, 1, 1, 1, 1, 1, 1);
  const Shape xs{2, 3, 8, 8}, ws{4, 3, 3, 3}, ys{2, 4, 8, 8};
  const Vec x = ref::random_vec(numel(xs), 171), w = ref::random_vec(numel(ws), 172);
  Tensor y = single->empty(ys, DType::f32);
  single->ops().conv2d_forward(p, ref::to_tensor(x, xs), ref::to_tensor(w, ws), Tensor(), y);
  EXPECT_TRUE(Close(ref::to_vec(y), ref::conv2d_forward(p, x, xs, w, ws, nullptr), kF32Tol));
  Tensor s = single->empty({100000}, DType::f32);
  single->ops().fill(s, 1.0f);
  single->ops().add_inplace(s, s);
  EXPECT_EQ(ref::to_vec(s), Vec(100000, 2.0));
}

TEST_F(CpuOpsTest, Bf16IsRejectedWithAClearError) {
  const Conv2dParams p;
  const Tensor x = ref::to_tensor(ref::random_vec(2 * 3 * 4 * 4, 181), {2, 3, 4, 4}, DType::bf16);
  const Tensor w = ref::to_tensor(ref::random_vec(4 * 3 * 3 * 3, 182), {4, 3, 3, 3}, DType::bf16);
  Tensor y = out({2, 4, 2, 2}, DType::bf16);
  try {
    ops().conv2d_forward(p, x, w, Tensor(), y);
    FAIL() << "bf16 convolution on the CPU must throw";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("bf16 is a GPU precision"), std::string::npos) << e.what();
  }
  Tensor a = ref::to_tensor({1, 2}, {2}, DType::bf16);
  Tensor r = out({2}, DType::bf16);
  EXPECT_THROW(ops().activation_forward(Activation::relu, 0, a, r), DeviceError);
}

TEST_F(CpuOpsTest, ShapeMismatchesAreInternalErrors) {
  const Conv2dParams p;
  const Tensor x = ref::to_tensor(ref::random_vec(2 * 3 * 4 * 4, 191), {2, 3, 4, 4});
  const Tensor w = ref::to_tensor(ref::random_vec(4 * 3 * 3 * 3, 192), {4, 3, 3, 3});
  Tensor wrong_y = out({2, 4, 3, 3});
  try {
    ops().conv2d_forward(p, x, w, Tensor(), wrong_y);
    FAIL() << "a wrong output shape must throw";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("(2, 4, 2, 2)"), std::string::npos) << e.what();
  }
  Tensor lw = ref::to_tensor(ref::random_vec(15, 193), {3, 5});
  Tensor lx = ref::to_tensor(ref::random_vec(8, 194), {2, 4});
  Tensor ly = out({2, 3});
  EXPECT_THROW(ops().linear_forward(lx, lw, Tensor(), ly), InternalError);
  Tensor a = out({3}), b = out({4});
  EXPECT_THROW(ops().add(a, b, a), InternalError);
}

}  // namespace
}  // namespace convoy
