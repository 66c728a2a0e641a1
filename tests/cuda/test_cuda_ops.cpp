// CUDA backend vs the float64 reference (tests/reference) and, where the contract is bit
// equality, vs the CPU backend. Every GPU test skips, with the reason, where no GPU is
// usable. Tolerances are relative to the reference's largest magnitude:
//   f32: 1e-4 for conv and GEMM (TF32 off), 1e-5 for elementwise, softmax and batch norm;
//   bf16 (inputs rounded to bf16 first, so both sides see the same values): 2e-2;
//   dropout masks, normalize_augment, casts, fills, concat/split: exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/backends/cuda/cuda_allocator.h"
#include "engine/backends/backend.h"
#include "engine/core/counter_rng.h"
#include "engine/core/error.h"
#include "tests/reference/reference_ops.h"

using namespace convoy;
using ref::Vec;

namespace {

// ---- backends -------------------------------------------------------------------------------

Backend& gpu() {
  static std::unique_ptr<Backend> b = make_cuda_backend(0, BackendOptions{});
  return *b;
}

Backend& gpu_deterministic() {
  static std::unique_ptr<Backend> b = make_cuda_backend(0, BackendOptions{.deterministic = true});
  return *b;
}

// Batch norm through Convoy's kernels rather than cuDNN (CONVOY_CUDA_BN_KERNELS=1).
Backend& gpu_bn_kernels() {
  static std::unique_ptr<Backend> b = [] {
    ::setenv("CONVOY_CUDA_BN_KERNELS", "1", 1);
    auto made = make_cuda_backend(0, BackendOptions{});
    ::unsetenv("CONVOY_CUDA_BN_KERNELS");
    return made;
  }();
  return *b;
}

// cuDNN's heuristics' pick instead of timing the algorithms (cudnn_benchmark: false).
Backend& gpu_heuristics() {
  static std::unique_ptr<Backend> b = make_cuda_backend(0, BackendOptions{.benchmark = false});
  return *b;
}

Backend& cpu() {
  static std::unique_ptr<Backend> b = make_cpu_backend(BackendOptions{});
  return *b;
}

class CudaFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = convoy::cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  }
};

// ---- data -----------------------------------------------------------------------------------

int64_t numel(const Shape& s) { return shape_numel(s); }

// Values rounded to dtype, so the reference computes on exactly what the GPU reads.
Vec rounded(Vec v, DType dt) {
  for (double& x : v) x = ref::round_to(x, dt);
  return v;
}

Vec random_in(const Shape& s, uint64_t seed, DType dt, double lo = -1.0, double hi = 1.0) {
  return rounded(ref::random_vec(numel(s), seed, lo, hi), dt);
}

// Each (n, c) plane a shuffle of distinct values exact in bf16 (planes of at most 256):
// pooling windows then have a unique maximum.
Vec distinct_planes(const Shape& s, uint64_t seed) {
  const int64_t plane = s[2] * s[3];
  std::mt19937_64 rng(seed);
  Vec v;
  for (int64_t p = 0; p < s[0] * s[1]; ++p) {
    std::vector<int64_t> idx(static_cast<size_t>(plane));
    std::iota(idx.begin(), idx.end(), 0);
    std::shuffle(idx.begin(), idx.end(), rng);
    for (int64_t i : idx) v.push_back(static_cast<double>(i - plane / 2) / 16.0);
  }
  return v;
}

// Flat nchw <-> flat nhwc for a 4-D logical (N, C, H, W) shape.
Vec permute(const Vec& v, const Shape& s, bool to_nhwc) {
  const int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  Vec out(v.size());
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = 0; b < c; ++b)
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < w; ++j) {
          const int64_t nchw = ((a * c + b) * h + i) * w + j;
          const int64_t nhwc = ((a * h + i) * w + j) * c + b;
          if (to_nhwc) out[nhwc] = v[nchw];
          else out[nchw] = v[nhwc];
        }
  return out;
}

// A device tensor holding v (given in nchw order) in dtype and layout.
Tensor dev(Backend& be, const Vec& v, const Shape& s, DType dt, Layout layout = Layout::nchw) {
  Tensor host = ref::to_tensor(layout == Layout::nhwc ? permute(v, s, true) : v, s, dt);
  if (layout == Layout::nhwc) host = host.with_layout(Layout::nhwc);
  return be.upload(host);
}

// An output tensor poisoned with NaN (or a sentinel), so unwritten elements show.
Tensor out(Backend& be, const Shape& s, DType dt, Layout layout = Layout::nchw) {
  Tensor t = be.empty(s, dt, layout);
  const bool fp = dt == DType::f32 || dt == DType::bf16 || dt == DType::f16;
  be.ops().fill(t, fp ? NAN : 77.f);
  return t;
}

// Host values in nchw order.
Vec host(const Tensor& t) {
  Vec v = ref::to_vec(t);
  return t.layout() == Layout::nhwc ? permute(v, t.shape(), false) : v;
}

double tol(DType dt, double f32_tol) { return dt == DType::f32 ? f32_tol : 2e-2; }

void expect_close(const Vec& got, const Vec& want, double tolerance, const std::string& what) {
  const double err = ref::max_relative_error(got, want);
  EXPECT_LE(err, tolerance) << what << ": max error " << err << " relative to max |ref| "
                            << ref::max_abs(want);
}

void expect_equal(const Vec& got, const Vec& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i]) && !(std::isnan(got[i]) && std::isnan(want[i]))) {
      if (bad++ == 0) first = i;
    }
  EXPECT_EQ(bad, 0u) << what << ": first difference at " << first << ": " << got[first]
                     << " vs " << want[first];
}

std::string name(DType dt, Layout l) {
  return std::string(dtype_name(dt)) + (l == Layout::nhwc ? " nhwc" : " nchw");
}

// ---- convolution ----------------------------------------------------------------------------

struct ConvCase {
  const char* what;
  Shape x;  // (N, C, H, W)
  int64_t k, r, s;
  Conv2dParams p;
  bool bias;
};

Conv2dParams conv(int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh = 1, int64_t dw = 1,
                  int64_t g = 1) {
  Conv2dParams p;
  p.stride_h = sh; p.stride_w = sw; p.pad_h = ph; p.pad_w = pw;
  p.dilation_h = dh; p.dilation_w = dw; p.groups = g;
  return p;
}

const ConvCase kConvCases[] = {
    {"3x3 same", {2, 3, 8, 8}, 4, 3, 3, conv(1, 1, 1, 1), true},
    {"batch 1, odd, stride 2, groups 2", {1, 4, 7, 9}, 6, 3, 3, conv(2, 2, 1, 1, 1, 1, 2), false},
    {"depthwise, dilation 2", {3, 8, 10, 10}, 8, 3, 3, conv(1, 1, 2, 2, 2, 2, 8), true},
    {"1x1 stride 2, odd", {2, 5, 11, 6}, 7, 1, 1, conv(2, 2, 0, 0), true},
    {"5x3 asymmetric", {2, 6, 9, 9}, 4, 5, 3, conv(1, 2, 2, 1), true},
    {"resnet-like 3x3", {4, 16, 14, 14}, 32, 3, 3, conv(1, 1, 1, 1), false},
    {"7x7 stride 2 stem", {2, 3, 23, 23}, 8, 7, 7, conv(2, 2, 3, 3), false},
    {"grayscale stem (channels padded to 8 in nhwc bf16)", {4, 1, 12, 12}, 16, 3, 3, conv(1, 1, 1, 1), true},
};

void check_conv(Backend& be, const ConvCase& cc, DType dt, Layout layout) {
  SCOPED_TRACE(std::string(cc.what) + ", " + name(dt, layout));
  const Conv2dParams& p = cc.p;
  const Shape xs = cc.x, ws = {cc.k, cc.x[1] / p.groups, cc.r, cc.s};
  const Shape ys = ref::conv2d_output_shape(p, xs, ws);
  const Vec x = random_in(xs, 11, dt), w = random_in(ws, 12, dt), b = random_in({cc.k}, 13, dt);
  const Vec dy = random_in(ys, 14, dt);
  const double t = tol(dt, 1e-4);

  Tensor xg = dev(be, x, xs, dt, layout), wg = dev(be, w, ws, dt, layout);
  Tensor bg = cc.bias ? dev(be, b, {cc.k}, dt) : Tensor();
  Tensor yg = out(be, ys, dt, layout);
  be.ops().conv2d_forward(p, xg, wg, bg, yg);
  expect_close(host(yg), ref::conv2d_forward(p, x, xs, w, ws, cc.bias ? &b : nullptr), t, "forward");

  Tensor dyg = dev(be, dy, ys, dt, layout);
  Tensor dxg = out(be, xs, dt, layout);
  be.ops().conv2d_backward_data(p, dyg, wg, dxg);
  expect_close(host(dxg), ref::conv2d_backward_data(p, dy, ys, w, ws, xs), t, "backward data");

  Tensor dwg = out(be, ws, dt, layout);
  Tensor dbg = cc.bias ? out(be, {cc.k}, dt) : Tensor();
  be.ops().conv2d_backward_weights(p, xg, dyg, dwg, dbg);
  expect_close(host(dwg), ref::conv2d_backward_weights(p, x, xs, dy, ys, ws), t, "backward weights");
  if (cc.bias) expect_close(host(dbg), ref::conv2d_backward_bias(dy, ys), t, "backward bias");
}

class CudaOpsConv : public CudaFixture {};

TEST_F(CudaOpsConv, F32Nchw) { for (const auto& c : kConvCases) check_conv(gpu(), c, DType::f32, Layout::nchw); }
TEST_F(CudaOpsConv, Bf16Nchw) { for (const auto& c : kConvCases) check_conv(gpu(), c, DType::bf16, Layout::nchw); }
TEST_F(CudaOpsConv, F32Nhwc) { for (const auto& c : kConvCases) check_conv(gpu(), c, DType::f32, Layout::nhwc); }
TEST_F(CudaOpsConv, Bf16Nhwc) { for (const auto& c : kConvCases) check_conv(gpu(), c, DType::bf16, Layout::nhwc); }
TEST_F(CudaOpsConv, HeuristicsF32Nchw) {
  for (const auto& c : kConvCases) check_conv(gpu_heuristics(), c, DType::f32, Layout::nchw);
}
TEST_F(CudaOpsConv, HeuristicsBf16Nhwc) {
  for (const auto& c : kConvCases) check_conv(gpu_heuristics(), c, DType::bf16, Layout::nhwc);
}

TEST_F(CudaOpsConv, DeterministicBackendRepeatsBitForBit) {
  Backend& be = gpu_deterministic();
  const ConvCase& cc = kConvCases[5];
  check_conv(be, cc, DType::f32, Layout::nchw);
  const Shape ws = {cc.k, cc.x[1], cc.r, cc.s};
  const Shape ys = ref::conv2d_output_shape(cc.p, cc.x, ws);
  Tensor xg = dev(be, random_in(cc.x, 21, DType::f32), cc.x, DType::f32);
  Tensor dyg = dev(be, random_in(ys, 22, DType::f32), ys, DType::f32);
  Tensor none;
  Tensor dw1 = out(be, ws, DType::f32), dw2 = out(be, ws, DType::f32);
  be.ops().conv2d_backward_weights(cc.p, xg, dyg, dw1, none);
  be.ops().conv2d_backward_weights(cc.p, xg, dyg, dw2, none);
  expect_equal(host(dw1), host(dw2), "two deterministic backward-weights runs");
}

// ---- batch norm -----------------------------------------------------------------------------

void check_batchnorm(Backend& be, const Shape& xs, DType dt, Layout layout) {
  SCOPED_TRACE(shape_str(xs) + ", " + name(dt, layout));
  const int64_t c = xs[1];
  const Vec x = random_in(xs, 31, dt, -2.0, 3.0);
  const Vec gamma = random_in({c}, 32, DType::f32, 0.5, 1.5), beta = random_in({c}, 33, DType::f32);
  const Vec rmean = random_in({c}, 34, DType::f32), rvar = random_in({c}, 35, DType::f32, 0.5, 2.0);
  const Vec dy = random_in(xs, 36, dt);
  // eps far from cuDNN's default, so that a backward ignoring the saved statistics shows.
  const float momentum = 0.1f, eps = 1e-2f;
  const ref::BatchNormTrain want = ref::batchnorm_forward_train(x, xs, gamma, beta, momentum, eps, rmean, rvar);

  Tensor xg = dev(be, x, xs, dt, layout);
  Tensor gg = dev(be, gamma, {c}, DType::f32), bg = dev(be, beta, {c}, DType::f32);
  Tensor rm = dev(be, rmean, {c}, DType::f32), rv = dev(be, rvar, {c}, DType::f32);
  Tensor yg = out(be, xs, dt, layout);
  Tensor sm = out(be, {c}, DType::f32), si = out(be, {c}, DType::f32);
  be.ops().batchnorm_forward_train(xg, gg, bg, momentum, eps, rm, rv, yg, sm, si);
  expect_close(host(yg), want.y, tol(dt, 1e-5), "train y");
  expect_close(host(sm), want.saved_mean, 1e-5, "saved mean");
  expect_close(host(si), want.saved_invstd, 1e-5, "saved invstd");
  expect_close(host(rm), want.running_mean, 1e-5, "running mean");
  expect_close(host(rv), want.running_var, 1e-5, "running var");

  Tensor ye = out(be, xs, dt, layout);
  be.ops().batchnorm_forward_eval(xg, gg, bg, rm, rv, eps, ye);
  expect_close(host(ye),
               ref::batchnorm_forward_eval(x, xs, gamma, beta, want.running_mean, want.running_var, eps),
               tol(dt, 1e-5), "eval y");

  Tensor dyg = dev(be, dy, xs, dt, layout);
  Tensor dxg = out(be, xs, dt, layout), dgg = out(be, {c}, DType::f32), dbg = out(be, {c}, DType::f32);
  be.ops().batchnorm_backward(xg, dyg, gg, sm, si, dxg, dgg, dbg);
  const ref::BatchNormGrads g = ref::batchnorm_backward(x, xs, dy, gamma, want.saved_mean, want.saved_invstd);
  expect_close(host(dxg), g.dx, tol(dt, 1e-4), "dx");
  expect_close(host(dgg), g.dgamma, dt == DType::f32 ? 1e-5 : 1e-3, "dgamma");
  expect_close(host(dbg), g.dbeta, dt == DType::f32 ? 1e-5 : 1e-3, "dbeta");
}

const Shape kBnShapes[] = {{2, 3, 5, 7}, {1, 8, 4, 4}, {4, 16, 3, 3}, {3, 32, 8, 8}, {16, 64, 2, 2}};

void check_batchnorm_all(Backend& be, DType dt, Layout layout) {
  for (const Shape& s : kBnShapes) check_batchnorm(be, s, dt, layout);
  if (layout == Layout::nchw) check_batchnorm(be, {8, 5}, dt, layout);  // (N, C)
}

class CudaOpsBatchNorm : public CudaFixture {};

TEST_F(CudaOpsBatchNorm, F32Nchw) { check_batchnorm_all(gpu(), DType::f32, Layout::nchw); }
TEST_F(CudaOpsBatchNorm, Bf16Nchw) { check_batchnorm_all(gpu(), DType::bf16, Layout::nchw); }
TEST_F(CudaOpsBatchNorm, F32Nhwc) { check_batchnorm_all(gpu(), DType::f32, Layout::nhwc); }
TEST_F(CudaOpsBatchNorm, Bf16Nhwc) { check_batchnorm_all(gpu(), DType::bf16, Layout::nhwc); }
TEST_F(CudaOpsBatchNorm, KernelsF32Nchw) { check_batchnorm_all(gpu_bn_kernels(), DType::f32, Layout::nchw); }
TEST_F(CudaOpsBatchNorm, KernelsBf16Nchw) { check_batchnorm_all(gpu_bn_kernels(), DType::bf16, Layout::nchw); }
TEST_F(CudaOpsBatchNorm, KernelsF32Nhwc) { check_batchnorm_all(gpu_bn_kernels(), DType::f32, Layout::nhwc); }
TEST_F(CudaOpsBatchNorm, KernelsBf16Nhwc) { check_batchnorm_all(gpu_bn_kernels(), DType::bf16, Layout::nhwc); }

// ---- activations ----------------------------------------------------------------------------

void check_activations(DType dt) {
  Backend& be = gpu();
  const Shape s = {3, 5, 7, 2};
  const Vec x = random_in(s, 41, dt, -3.0, 3.0), dy = random_in(s, 42, dt);
  Tensor xg = dev(be, x, s, dt), dyg = dev(be, dy, s, dt);
  for (Activation kind : {Activation::relu, Activation::leaky_relu, Activation::gelu}) {
    SCOPED_TRACE("activation " + std::to_string(static_cast<int>(kind)) + ", " + name(dt, Layout::nchw));
    const float alpha = 0.1f;
    Tensor yg = out(be, s, dt);
    be.ops().activation_forward(kind, alpha, xg, yg);
    expect_close(host(yg), ref::activation_forward(kind, alpha, x), tol(dt, 1e-5), "forward");
    Tensor dxg = out(be, s, dt);
    be.ops().activation_backward(kind, alpha, xg, yg, dyg, dxg);
    const Vec want = ref::activation_backward(kind, alpha, x, dy);
    expect_close(host(dxg), want, tol(dt, 1e-5), "backward");
    if (kind != Activation::gelu) {  // relu-like backward may read y instead of x
      Tensor dx2 = out(be, s, dt);
      be.ops().activation_backward(kind, alpha, Tensor(), yg, dyg, dx2);
      expect_close(host(dx2), want, tol(dt, 1e-5), "backward from y");
    }
  }
}

class CudaOpsActivation : public CudaFixture {};
TEST_F(CudaOpsActivation, F32) { check_activations(DType::f32); }
TEST_F(CudaOpsActivation, Bf16) { check_activations(DType::bf16); }

// ---- pooling --------------------------------------------------------------------------------

Pool2dParams pool(PoolKind kind, int64_t k, int64_t st, int64_t pad) {
  Pool2dParams p;
  p.kind = kind; p.kernel_h = p.kernel_w = k; p.stride_h = p.stride_w = st; p.pad_h = p.pad_w = pad;
  return p;
}

void check_pool(DType dt, Layout layout) {
  Backend& be = gpu();
  struct Case { Pool2dParams p; Shape x; };
  Pool2dParams rect = pool(PoolKind::avg, 3, 2, 1);
  rect.kernel_w = 2; rect.stride_w = 1; rect.pad_w = 0;
  const Case cases[] = {
      {pool(PoolKind::max, 2, 2, 0), {2, 3, 8, 8}},
      {pool(PoolKind::max, 3, 2, 1), {2, 4, 9, 7}},
      {pool(PoolKind::max, 3, 1, 1), {1, 2, 5, 6}},
      {pool(PoolKind::avg, 3, 1, 1), {2, 3, 7, 5}},
      {pool(PoolKind::avg, 2, 2, 0), {3, 2, 7, 7}},
      {pool(PoolKind::avg, 7, 7, 0), {2, 16, 7, 7}},  // global average
      {rect, {2, 3, 9, 8}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.p.kind == PoolKind::max ? "max " : "avg ") + shape_str(c.x) + ", " +
                 name(dt, layout));
    const Shape ys = ref::pool2d_output_shape(c.p, c.x);
    const Vec x = distinct_planes(c.x, 51), dy = random_in(ys, 52, dt);
    Tensor xg = dev(be, x, c.x, dt, layout), yg = out(be, ys, dt, layout), ws;
    be.ops().pool2d_forward(c.p, xg, yg, ws, true);
    expect_close(host(yg), ref::pool2d_forward(c.p, x, c.x), tol(dt, 1e-6), "forward");
    Tensor dyg = dev(be, dy, ys, dt, layout), dxg = out(be, c.x, dt, layout);
    be.ops().pool2d_backward(c.p, xg, yg, dyg, ws, dxg);
    expect_close(host(dxg), ref::pool2d_backward(c.p, x, c.x, dy), tol(dt, 1e-6), "backward");
  }
}

class CudaOpsPool : public CudaFixture {};
TEST_F(CudaOpsPool, F32Nchw) { check_pool(DType::f32, Layout::nchw); }
TEST_F(CudaOpsPool, Bf16Nchw) { check_pool(DType::bf16, Layout::nchw); }
TEST_F(CudaOpsPool, F32Nhwc) { check_pool(DType::f32, Layout::nhwc); }
TEST_F(CudaOpsPool, Bf16Nhwc) { check_pool(DType::bf16, Layout::nhwc); }

// ---- linear ---------------------------------------------------------------------------------

void check_linear(DType dt) {
  Backend& be = gpu();
  struct Case { int64_t n, k, m; bool bias; };
  const Case cases[] = {{4, 7, 5, true}, {1, 16, 10, true}, {33, 64, 17, false}, {128, 256, 96, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE("N " + std::to_string(c.n) + " K " + std::to_string(c.k) + " M " +
                 std::to_string(c.m) + ", " + name(dt, Layout::nchw));
    const Shape xs = {c.n, c.k}, ws = {c.m, c.k}, ys = {c.n, c.m};
    const Vec x = random_in(xs, 61, dt), w = random_in(ws, 62, dt), b = random_in({c.m}, 63, dt);
    const Vec dy = random_in(ys, 64, dt);
    Tensor xg = dev(be, x, xs, dt), wg = dev(be, w, ws, dt), bg = c.bias ? dev(be, b, {c.m}, dt) : Tensor();
    Tensor yg = out(be, ys, dt);
    be.ops().linear_forward(xg, wg, bg, yg);
    expect_close(host(yg), ref::linear_forward(x, xs, w, ws, c.bias ? &b : nullptr), tol(dt, 1e-4), "forward");
    const ref::LinearGrads g = ref::linear_backward(x, xs, w, ws, dy);
    Tensor dyg = dev(be, dy, ys, dt), dxg = out(be, xs, dt), dwg = out(be, ws, dt);
    Tensor dbg = c.bias ? out(be, {c.m}, dt) : Tensor();
    be.ops().linear_backward(xg, wg, dyg, dxg, dwg, dbg);
    expect_close(host(dxg), g.dx, tol(dt, 1e-4), "dx");
    expect_close(host(dwg), g.dw, tol(dt, 1e-4), "dw");
    if (c.bias) expect_close(host(dbg), g.db, tol(dt, 1e-5), "db");
    Tensor no_dx, dw2 = out(be, ws, dt), db2 = out(be, {c.m}, dt);  // the first layer needs no dx
    be.ops().linear_backward(xg, wg, dyg, no_dx, dw2, db2);
    expect_close(host(dw2), g.dw, tol(dt, 1e-4), "dw without dx");
    expect_close(host(db2), g.db, tol(dt, 1e-5), "db without dx");
  }
}

class CudaOpsLinear : public CudaFixture {};
TEST_F(CudaOpsLinear, F32) { check_linear(DType::f32); }
TEST_F(CudaOpsLinear, Bf16) { check_linear(DType::bf16); }

// ---- elementwise, concat, split -------------------------------------------------------------

class CudaOpsElementwise : public CudaFixture {};

TEST_F(CudaOpsElementwise, AddAndAddInplace) {
  Backend& be = gpu();
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(name(dt, Layout::nchw));
    const Shape s = {3, 7, 5, 9};
    const Vec a = random_in(s, 71, dt), b = random_in(s, 72, dt);
    Tensor ag = dev(be, a, s, dt), bg = dev(be, b, s, dt), yg = out(be, s, dt);
    be.ops().add(ag, bg, yg);
    const Vec want = ref::add(a, b);
    expect_close(host(yg), want, tol(dt, 1e-7), "add");
    be.ops().add_inplace(ag, bg);
    expect_close(host(ag), want, tol(dt, 1e-7), "add_inplace");
  }
}

TEST_F(CudaOpsElementwise, ConcatAndSplitChannels) {
  Backend& be = gpu();
  for (DType dt : {DType::f32, DType::bf16}) {
    for (Layout layout : {Layout::nchw, Layout::nhwc}) {
      SCOPED_TRACE(name(dt, layout));
      const std::vector<Shape> shapes = {{2, 2, 3, 5}, {2, 3, 3, 5}, {2, 1, 3, 5}};
      const Shape ys = {2, 6, 3, 5};
      std::vector<Vec> xs;
      std::vector<Tensor> xg;
      for (size_t i = 0; i < shapes.size(); ++i) {
        xs.push_back(random_in(shapes[i], 80 + i, dt));
        xg.push_back(dev(be, xs.back(), shapes[i], dt, layout));
      }
      Tensor yg = out(be, ys, dt, layout);
      be.ops().concat_channels(xg, yg);
      const Vec want = ref::concat_channels(xs, shapes);
      expect_equal(host(yg), want, "concat");
      std::vector<Tensor> parts;
      for (const Shape& s : shapes) parts.push_back(out(be, s, dt, layout));
      be.ops().split_channels(yg, parts);
      for (size_t i = 0; i < parts.size(); ++i) expect_equal(host(parts[i]), xs[i], "split");
    }
  }
}

TEST_F(CudaOpsElementwise, DropoutMaskEqualsCpuBitForBit) {
  Backend& be = gpu();
  const Shape s = {4, 37, 5, 3};
  const float p = 0.3f;
  const uint64_t seed = 0xC0FFEE;
  const Vec x = random_in(s, 91, DType::f32, 0.5, 1.5);  // no zeros: a zero output means dropped
  Tensor xg = dev(be, x, s, DType::f32), yg = out(be, s, DType::f32);
  be.ops().dropout_forward(p, seed, xg, yg);
  Tensor xc = ref::to_tensor(x, s), yc = cpu().empty(s, DType::f32);
  cpu().ops().dropout_forward(p, seed, xc, yc);
  const Vec got = host(yg), cpu_y = ref::to_vec(yc);
  int64_t kept = 0, mask_mismatch = 0;
  for (int64_t i = 0; i < numel(s); ++i) {
    const bool keep = ref::dropout_keeps(p, seed, i);
    kept += keep;
    if ((got[i] != 0.0) != keep || (cpu_y[i] != 0.0) != keep) ++mask_mismatch;
  }
  EXPECT_EQ(mask_mismatch, 0);
  EXPECT_GT(kept, numel(s) / 2);
  EXPECT_LT(kept, numel(s) * 9 / 10);
  expect_equal(got, cpu_y, "dropout vs CPU");
  expect_close(got, ref::dropout_forward(p, seed, x), 1e-6, "dropout vs reference");
  for (DType dt : {DType::f32, DType::bf16}) {
    const Vec dy = random_in(s, 92, dt);
    Tensor dyg = dev(be, dy, s, dt), dxg = out(be, s, dt);
    be.ops().dropout_backward(p, seed, dyg, dxg);
    expect_close(host(dxg), ref::dropout_backward(p, seed, dy), tol(dt, 1e-6), "dropout backward");
  }
}

// ---- softmax and cross-entropy --------------------------------------------------------------

void check_cross_entropy(DType dt) {
  Backend& be = gpu();
  struct Case { int64_t n, c; float smoothing; };
  const Case cases[] = {{8, 10, 0.1f}, {1, 37, 0.0f}, {64, 1000, 0.1f}, {300, 3, 0.2f}};
  for (const Case& c : cases) {
    SCOPED_TRACE("N " + std::to_string(c.n) + " C " + std::to_string(c.c) + " s " +
                 std::to_string(c.smoothing) + ", " + name(dt, Layout::nchw));
    const Shape s = {c.n, c.c};
    const Vec logits = random_in(s, 101, dt, -4.0, 4.0);
    const std::vector<int32_t> labels = ref::random_ints(c.n, static_cast<int32_t>(c.c), 102);
    const ref::CrossEntropy want = ref::softmax_cross_entropy(logits, c.n, c.c, labels, c.smoothing);
    Tensor lg = dev(be, logits, s, dt), lab = be.upload(Tensor::from_ints(labels, {c.n}));
    Tensor loss = out(be, {1}, DType::f32), dl = out(be, s, dt), correct = out(be, {1}, DType::i32);
    be.ops().softmax_cross_entropy(lg, lab, c.smoothing, loss, dl, correct);
    expect_close(host(loss), {want.loss}, 1e-5, "loss");
    expect_close(host(dl), want.dlogits, tol(dt, 1e-5), "dlogits");
    EXPECT_EQ(host(correct)[0], static_cast<double>(want.correct));
    // Evaluation: neither gradient nor count wanted.
    Tensor loss2 = out(be, {1}, DType::f32), none1, none2;
    be.ops().softmax_cross_entropy(lg, lab, c.smoothing, loss2, none1, none2);
    expect_close(host(loss2), {want.loss}, 1e-5, "loss without outputs");
    Tensor probs = out(be, s, DType::f32);
    be.ops().softmax(lg, probs);
    expect_close(host(probs), ref::softmax(logits, c.n, c.c), 1e-5, "softmax");
  }
}

class CudaOpsSoftmax : public CudaFixture {};
TEST_F(CudaOpsSoftmax, CrossEntropyF32) { check_cross_entropy(DType::f32); }
TEST_F(CudaOpsSoftmax, CrossEntropyBf16) { check_cross_entropy(DType::bf16); }

TEST_F(CudaOpsSoftmax, InvalidLabelGivesNaNNotACrash) {
  Backend& be = gpu();
  Tensor lg = dev(be, random_in({2, 4}, 103, DType::f32), {2, 4}, DType::f32);
  Tensor lab = be.upload(Tensor::from_ints({1, 9}, {2}));
  Tensor loss = out(be, {1}, DType::f32), none1, none2;
  be.ops().softmax_cross_entropy(lg, lab, 0.f, loss, none1, none2);
  EXPECT_TRUE(std::isnan(host(loss)[0]));
}

// ---- casts and fills ------------------------------------------------------------------------

class CudaOpsCast : public CudaFixture {};

TEST_F(CudaOpsCast, AllPairsRoundToNearestEven) {
  Backend& be = gpu();
  Vec base = ref::random_vec(1000, 111, -100.0, 100.0);
  // Halfway cases for bf16 and f16, a subnormal, zero, large values.
  for (double v : {0.0, 1.0 + std::ldexp(1.0, -8), 1.0 + 3 * std::ldexp(1.0, -8),
                   1.0 + std::ldexp(1.0, -11), -2.5, 1e-40, 6e-8, 65504.0, 70000.0, 1e30})
    base.push_back(v);
  const Shape s = {static_cast<int64_t>(base.size())};
  for (DType from : {DType::f32, DType::bf16, DType::f16})
    for (DType to : {DType::f32, DType::bf16, DType::f16}) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      const Vec x = rounded(base, from);
      Tensor xg = dev(be, x, s, from), yg = out(be, s, to);
      be.ops().cast(xg, yg);
      expect_equal(host(yg), ref::cast(x, to), "cast");
    }
}

// nchw <-> nhwc with any dtype pair, and the shapes where both orders coincide (C = 1, 1x1).
TEST_F(CudaOpsCast, ConvertsLayouts) {
  Backend& be = gpu();
  for (const Shape& s : {Shape{2, 3, 4, 5}, Shape{3, 1, 6, 7}, Shape{4, 9, 1, 1}, Shape{1, 17, 3, 2}})
    for (DType from : {DType::f32, DType::bf16})
      for (DType to : {DType::f32, DType::bf16, DType::f16})
        for (Layout l : {Layout::nchw, Layout::nhwc}) {
          const Layout other = l == Layout::nchw ? Layout::nhwc : Layout::nchw;
          SCOPED_TRACE(shape_str(s) + " " + name(from, l) + " -> " + name(to, other));
          const Vec x = random_in(s, 112, from);
          Tensor xg = dev(be, x, s, from, l), yg = out(be, s, to, other);
          be.ops().cast(xg, yg);
          expect_equal(host(yg), ref::cast(x, to), "cast");
          // The same conversion on the CPU, element for element.
          Tensor yc = cpu().empty(s, to, other);
          cpu().ops().cast(xg.to_cpu(), yc);
          expect_equal(ref::to_vec(yg.to_cpu()), ref::to_vec(yc), "cast vs the CPU");
        }
}

TEST_F(CudaOpsCast, Fill) {
  Backend& be = gpu();
  const Shape s = {3, 1001};
  for (auto [dt, v] : {std::pair{DType::f32, 3.25f}, {DType::bf16, -1.5f}, {DType::f16, 0.125f},
                       {DType::i32, 7.f}, {DType::u8, 200.f}}) {
    Tensor t = be.empty(s, dt);
    be.ops().fill(t, v);
    expect_equal(host(t), Vec(static_cast<size_t>(numel(s)), v), "fill " + std::string(dtype_name(dt)));
  }
}

// ---- optimizers -----------------------------------------------------------------------------

// Sizes that cross the fused kernels' chunk boundary (8192) and a tiny one.
const std::vector<Shape> kParamShapes = {{7}, {100, 10}, {20001}, {3, 3, 3, 3}};

TEST(CudaOpsOptim, SgdMatchesCpuAndReference) {
  if (auto why = convoy::cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  for (bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov ? "nesterov" : "momentum");
    SgdHyper h;
    h.lr = 0.05f; h.momentum = 0.9f; h.nesterov = nesterov;
    const size_t np = kParamShapes.size();
    std::vector<Tensor> pg, gg, bg, pc, gc, bc;
    std::vector<Vec> pr, br;
    for (size_t i = 0; i < np; ++i) {
      const Vec p0 = random_in(kParamShapes[i], 120 + i, DType::f32);
      const Vec zero(p0.size(), 0.0);
      pg.push_back(dev(gpu(), p0, kParamShapes[i], DType::f32));
      bg.push_back(dev(gpu(), zero, kParamShapes[i], DType::f32));
      pc.push_back(ref::to_tensor(p0, kParamShapes[i]));
      bc.push_back(ref::to_tensor(zero, kParamShapes[i]));
      pr.push_back(p0);
      br.push_back(zero);
      gg.emplace_back();
      gc.emplace_back();
    }
    for (int step = 0; step < 5; ++step) {
      std::vector<SgdSlot> sg, sc;
      std::vector<Vec> grads;
      for (size_t i = 0; i < np; ++i) {
        grads.push_back(random_in(kParamShapes[i], 1000 + 10 * step + i, DType::f32));
        gg[i] = dev(gpu(), grads[i], kParamShapes[i], DType::f32);
        gc[i] = ref::to_tensor(grads[i], kParamShapes[i]);
        const float wd = i % 2 ? 0.f : 1e-2f;
        sg.push_back({&pg[i], &gg[i], &bg[i], wd});
        sc.push_back({&pc[i], &gc[i], &bc[i], wd});
        ref::sgd_step(h, wd, pr[i], grads[i], br[i]);
      }
      gpu().ops().sgd_update(sg, h);
      cpu().ops().sgd_update(sc, h);
    }
    for (size_t i = 0; i < np; ++i) {
      expect_close(host(pg[i]), ref::to_vec(pc[i]), 1e-6, "param vs CPU " + std::to_string(i));
      expect_close(host(bg[i]), ref::to_vec(bc[i]), 1e-6, "momentum vs CPU " + std::to_string(i));
      expect_close(host(pg[i]), pr[i], 1e-5, "param vs reference " + std::to_string(i));
    }
  }
}

TEST(CudaOpsOptim, AdamWMatchesCpuAndReference) {
  if (auto why = convoy::cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  AdamHyper h;
  h.lr = 1e-2f;
  const size_t np = kParamShapes.size();
  std::vector<Tensor> pg, gg, mg, vg, pc, gc, mc, vc;
  std::vector<Vec> pr, mr, vr;
  for (size_t i = 0; i < np; ++i) {
    const Vec p0 = random_in(kParamShapes[i], 130 + i, DType::f32);
    const Vec zero(p0.size(), 0.0);
    pg.push_back(dev(gpu(), p0, kParamShapes[i], DType::f32));
    mg.push_back(dev(gpu(), zero, kParamShapes[i], DType::f32));
    vg.push_back(dev(gpu(), zero, kParamShapes[i], DType::f32));
    pc.push_back(ref::to_tensor(p0, kParamShapes[i]));
    mc.push_back(ref::to_tensor(zero, kParamShapes[i]));
    vc.push_back(ref::to_tensor(zero, kParamShapes[i]));
    pr.push_back(p0);
    mr.push_back(zero);
    vr.push_back(zero);
    gg.emplace_back();
    gc.emplace_back();
  }
  for (int step = 1; step <= 5; ++step) {
    h.step = step;
    std::vector<AdamSlot> sg, sc;
    for (size_t i = 0; i < np; ++i) {
      const Vec grad = random_in(kParamShapes[i], 2000 + 10 * step + i, DType::f32);
      gg[i] = dev(gpu(), grad, kParamShapes[i], DType::f32);
      gc[i] = ref::to_tensor(grad, kParamShapes[i]);
      const float wd = i % 2 ? 0.f : 0.05f;
      sg.push_back({&pg[i], &gg[i], &mg[i], &vg[i], wd});
      sc.push_back({&pc[i], &gc[i], &mc[i], &vc[i], wd});
      ref::adamw_step(h, wd, pr[i], grad, mr[i], vr[i]);
    }
    gpu().ops().adamw_update(sg, h);
    cpu().ops().adamw_update(sc, h);
  }
  for (size_t i = 0; i < np; ++i) {
    expect_close(host(pg[i]), ref::to_vec(pc[i]), 1e-6, "param vs CPU " + std::to_string(i));
    expect_close(host(mg[i]), ref::to_vec(mc[i]), 1e-6, "m vs CPU " + std::to_string(i));
    expect_close(host(vg[i]), ref::to_vec(vc[i]), 1e-6, "v vs CPU " + std::to_string(i));
    expect_close(host(pg[i]), pr[i], 1e-5, "param vs reference " + std::to_string(i));
  }
}

// ---- input pipeline -------------------------------------------------------------------------

TEST(CudaOpsAugment, NormalizeAugmentEqualsCpuExactly) {
  if (auto why = convoy::cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const Shape s = {16, 3, 9, 11};
  std::vector<uint8_t> pixels(static_cast<size_t>(numel(s)));
  std::mt19937 rng(141);
  for (auto& v : pixels) v = static_cast<uint8_t>(rng() % 256);
  Tensor images = Tensor::empty(s, DType::u8);
  std::copy(pixels.begin(), pixels.end(), images.data<uint8_t>());
  Tensor images_g = gpu().upload(images);
  for (auto [pad, flip] : {std::pair<int64_t, bool>{0, false}, {3, true}, {2, false}, {0, true}}) {
    SCOPED_TRACE("padding " + std::to_string(pad) + (flip ? ", flip" : ""));
    NormalizeAugment a;
    a.mean[0] = 0.49f; a.mean[1] = 0.48f; a.mean[2] = 0.45f;
    a.std[0] = 0.25f; a.std[1] = 0.24f; a.std[2] = 0.26f;
    a.crop_padding = pad;
    a.horizontal_flip = flip;
    const uint64_t seed = 0x5EED + pad;
    Tensor yc = cpu().empty(s, DType::f32);
    cpu().ops().normalize_augment(images, a, seed, yc);
    const Vec want = ref::to_vec(yc);
    expect_close(want, ref::normalize_augment(pixels, s, a, seed), 1e-6, "CPU vs reference");
    for (Layout layout : {Layout::nchw, Layout::nhwc}) {
      Tensor yg = out(gpu(), s, DType::f32, layout);
      gpu().ops().normalize_augment(images_g, a, seed, yg);
      expect_equal(host(yg), want, "f32 " + name(DType::f32, layout));
      Tensor yb = out(gpu(), s, DType::bf16, layout);
      gpu().ops().normalize_augment(images_g, a, seed, yb);
      expect_equal(host(yb), rounded(want, DType::bf16), "bf16 " + name(DType::bf16, layout));
    }
  }
}

// ---- allocator and backend ------------------------------------------------------------------

TEST(CudaAllocator, BucketSizes) {  // pure arithmetic: runs without a GPU
  using cuda::CudaAllocator;
  EXPECT_EQ(CudaAllocator::bucket_size(0), 512u);
  EXPECT_EQ(CudaAllocator::bucket_size(1), 512u);
  EXPECT_EQ(CudaAllocator::bucket_size(513), 1024u);
  EXPECT_EQ(CudaAllocator::bucket_size(size_t(1) << 20), size_t(1) << 20);
  EXPECT_EQ(CudaAllocator::bucket_size((size_t(1) << 20) + 1), size_t(5) << 18);
  EXPECT_EQ(CudaAllocator::bucket_size(size_t(3) << 30), size_t(3) << 30);
  size_t previous = 0;
  for (size_t b = 1; b < (size_t(1) << 34); b = b * 3 / 2 + 1) {
    const size_t s = CudaAllocator::bucket_size(b);
    EXPECT_GE(s, b);
    EXPECT_LE(s, b + b / 4 + 512);  // at most 25% (or 512 bytes) of waste
    EXPECT_GE(s, previous);
    previous = s;
  }
}

TEST(CudaAllocator, SteadyStateTrainingStepCallsNoCudaMalloc) {
  if (auto why = convoy::cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  Backend& be = gpu();
  auto* alloc = dynamic_cast<cuda::CudaAllocator*>(be.allocator().get());
  ASSERT_NE(alloc, nullptr);
  const Conv2dParams p = conv(1, 1, 1, 1);
  const Shape xs = {8, 16, 12, 12}, ws = {16, 16, 3, 3};
  const Vec xv = random_in(xs, 151, DType::f32), wv = random_in(ws, 152, DType::f32);
  const Vec fwv = random_in({10, 16 * 36}, 153, DType::f32, -0.1, 0.1);
  const Tensor labels_host = Tensor::from_ints({1, 2, 3, 4, 5, 6, 7, 8}, {8});
  // One small training step: conv, batch norm, relu, pool, linear, loss, backward, SGD.
  auto step = [&] {
    Ops& ops = be.ops();
    Tensor x = dev(be, xv, xs, DType::f32), w = dev(be, wv, ws, DType::f32);
    Tensor b = be.zeros({16}, DType::f32), y = be.empty(xs, DType::f32);
    ops.conv2d_forward(p, x, w, b, y);
    Tensor gamma = be.empty({16}, DType::f32), beta = be.zeros({16}, DType::f32);
    ops.fill(gamma, 1.f);
    Tensor rm = be.zeros({16}, DType::f32), rv = be.zeros({16}, DType::f32);
    Tensor z = be.empty(xs, DType::f32), sm = be.empty({16}, DType::f32), si = be.empty({16}, DType::f32);
    ops.batchnorm_forward_train(y, gamma, beta, 0.1f, 1e-5f, rm, rv, z, sm, si);
    Tensor r = be.empty(xs, DType::f32);
    ops.activation_forward(Activation::relu, 0.f, z, r);
    Tensor pooled = be.empty({8, 16, 6, 6}, DType::f32), pws;
    ops.pool2d_forward(pool(PoolKind::max, 2, 2, 0), r, pooled, pws, true);
    Tensor flat = pooled.reshape({8, 16 * 36});
    Tensor fw = dev(be, fwv, {10, 16 * 36}, DType::f32), fb = be.zeros({10}, DType::f32);
    Tensor logits = be.empty({8, 10}, DType::f32);
    ops.linear_forward(flat, fw, fb, logits);
    Tensor labels = be.upload(labels_host);
    Tensor loss = be.empty({1}, DType::f32), dl = be.empty({8, 10}, DType::f32), hits = be.empty({1}, DType::i32);
    ops.softmax_cross_entropy(logits, labels, 0.1f, loss, dl, hits);
    Tensor dflat = be.empty({8, 16 * 36}, DType::f32), dfw = be.empty({10, 16 * 36}, DType::f32), dfb = be.empty({10}, DType::f32);
    ops.linear_backward(flat, fw, dl, dflat, dfw, dfb);
    Tensor dr = be.empty(xs, DType::f32), dz = be.empty(xs, DType::f32);
    ops.pool2d_backward(pool(PoolKind::max, 2, 2, 0), r, pooled, dflat.reshape({8, 16, 6, 6}), pws, dr);
    ops.activation_backward(Activation::relu, 0.f, z, r, dr, dz);
    Tensor dy = be.empty(xs, DType::f32), dg = be.empty({16}, DType::f32), dbeta = be.empty({16}, DType::f32);
    ops.batchnorm_backward(y, dz, gamma, sm, si, dy, dg, dbeta);
    Tensor dx = be.empty(xs, DType::f32), dw = be.empty(ws, DType::f32), db = be.empty({16}, DType::f32);
    ops.conv2d_backward_data(p, dy, w, dx);
    ops.conv2d_backward_weights(p, x, dy, dw, db);
    Tensor buf = be.zeros(ws, DType::f32);
    SgdSlot slot{&w, &dw, &buf, 1e-4f};
    ops.sgd_update(std::span<const SgdSlot>(&slot, 1), SgdHyper{});
    be.synchronize();
    return host(loss)[0];
  };
  const double first = step();
  EXPECT_TRUE(std::isfinite(first));
  const uint64_t mallocs = alloc->stats().cuda_mallocs;
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(step(), first, 1e-5 * std::fabs(first));
  EXPECT_EQ(alloc->stats().cuda_mallocs, mallocs) << "steady-state steps called cudaMalloc";
  EXPECT_GT(alloc->stats().cache_hits, 0u);
}

TEST(CudaAllocator, CopyToHostWaitsForQueuedWork) {
  if (auto why = convoy::cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  Backend& be = gpu();
  const int64_t n = int64_t(1) << 26;  // 256 MiB: the kernels take a while
  Tensor t = be.empty({n}, DType::f32);
  be.ops().fill(t, 3.f);
  be.ops().add_inplace(t, t);
  be.ops().add_inplace(t, t);
  const std::vector<float> v = t.to_floats();  // no synchronize() first: the copy must wait
  int64_t wrong = 0;
  for (float f : v) wrong += f != 12.f;
  EXPECT_EQ(wrong, 0);
  // And a host-to-device copy followed by device work.
  Tensor h = Tensor::from_floats(std::vector<float>(1000, 2.5f), {1000});
  Tensor d = be.upload(h);
  be.ops().add_inplace(d, d);
  for (float f : d.to_floats()) ASSERT_EQ(f, 5.f);
}

TEST(CudaBackend, UnavailableReasonMatchesWhatHappens) {  // runs with or without a GPU
  const std::string why = cuda_unavailable_reason();
  EXPECT_EQ(why, cuda_unavailable_reason());
  const std::vector<std::string> lines = cuda_doctor_lines();
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  EXPECT_NE(all.find("cuDNN"), std::string::npos) << all;
  EXPECT_NE(all.find("cuBLAS"), std::string::npos) << all;
  if (!why.empty()) {
    try {
      make_cuda_backend(0, BackendOptions{});
      ADD_FAILURE() << "make_cuda_backend succeeded although: " << why;
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
    EXPECT_NE(all.find(why), std::string::npos) << all;
  } else {
    auto be = make_cuda_backend(0, BackendOptions{});
    EXPECT_EQ(be->device(), Device::cuda(0));
    EXPECT_NE(be->describe().find("cuda:0"), std::string::npos) << be->describe();
    EXPECT_NE(be->describe().find("cuDNN"), std::string::npos) << be->describe();
    EXPECT_NE(all.find("cuda:0: "), std::string::npos) << all;
    EXPECT_THROW(make_cuda_backend(1000, BackendOptions{}), DeviceError);
    EXPECT_THROW(make_cuda_backend(-1, BackendOptions{}), DeviceError);
  }
}

TEST(CudaBackend, WrongDeviceOrShapeIsAnErrorNotACrash) {
  if (auto why = convoy::cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  Backend& be = gpu();
  Tensor host_x = Tensor::zeros({2, 3});
  Tensor y = be.empty({2, 3}, DType::f32), wrong = be.empty({3, 2}, DType::f32);
  EXPECT_THROW(be.ops().add(host_x, y, y), InternalError);
  EXPECT_THROW(be.ops().add(y, wrong, y), InternalError);
  Tensor x4 = be.empty({1, 3, 8, 8}, DType::f32), w4 = be.empty({4, 3, 3, 3}, DType::f32);
  Tensor y_bad = be.empty({1, 4, 7, 7}, DType::f32), none;
  EXPECT_THROW(be.ops().conv2d_forward(conv(1, 1, 1, 1), x4, w4, none, y_bad), InternalError);
}

}  // namespace
