// precision: tf32 (BackendOptions::tf32): f32 tensors whose convolutions and GEMMs run on TF32
// tensor cores. Against the float64 reference, TF32 results stay within TF32's rounding (inputs
// cut to 10-bit mantissas: ~1e-3 of the output's scale) and are measurably off exact f32, which
// shows the tensor cores ran; the default backend stays exact. A model's training step in TF32
// is the exact step within that rounding.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/ops/conv2d.h"
#include "ops/op_cases.h"
#include "reference/reference_ops.h"
#include "tests/model_step.h"

using namespace convoy;
using namespace convoy::optest;

namespace {

class CudaTf32 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  }
};

// Heuristics, not timing: the algorithm (and so whether tensor cores run) is the same every run.
std::unique_ptr<Backend> backend(bool tf32) {
  BackendOptions o;
  o.tf32 = tf32;
  o.benchmark = false;
  return make_cuda_backend(0, o);
}

struct ConvResults {
  Vec y, dx, dw;
};

// A 3x3 convolution, 64 -> 64 channels over 16x16, f32 channels-last: forward and both gradients.
ConvResults run_conv(Backend& be, const Conv2dParams& p, const Vec& x, const Vec& w, const Vec& dy, const Shape& xs,
                     const Shape& ws, const Shape& ys) {
  const Tensor tx = device_tensor(be, x, xs, DType::f32, Layout::nhwc);
  const Tensor tw = device_tensor(be, w, ws, DType::f32, Layout::nhwc);
  const Tensor tdy = device_tensor(be, dy, ys, DType::f32, Layout::nhwc);
  Tensor y = poisoned(be, ys, DType::f32, Layout::nhwc), dx = poisoned(be, xs, DType::f32, Layout::nhwc),
         dw = poisoned(be, ws, DType::f32, Layout::nhwc), none;
  be.ops().conv2d_forward(p, tx, tw, Tensor(), y);
  be.ops().conv2d_backward_data(p, tdy, tw, dx);
  be.ops().conv2d_backward_weights(p, tx, tdy, dw, none);
  return {read(y), read(dx), read(dw)};
}

TEST_F(CudaTf32, ConvolutionsRunOnTf32WithinItsRoundingAndTheDefaultStaysExact) {
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  const Shape xs = {8, 64, 16, 16}, ws = {64, 64, 3, 3}, ys = {8, 64, 16, 16};
  const Vec x = random_values(xs, 1, DType::f32), w = random_values(ws, 2, DType::f32),
            dy = random_values(ys, 3, DType::f32);
  const Vec ry = ref::conv2d_forward(p, x, xs, w, ws, nullptr);
  const Vec rdx = ref::conv2d_backward_data(p, dy, ys, w, ws, xs);
  const Vec rdw = ref::conv2d_backward_weights(p, x, xs, dy, ys, ws);

  auto tf32 = backend(true);
  EXPECT_NE(tf32->describe().find("TF32 math"), std::string::npos) << tf32->describe();
  EXPECT_EQ(tf32->preferred_layout(DType::f32), Layout::nhwc);  // tensor cores want channels-last
  const ConvResults t = run_conv(*tf32, p, x, w, dy, xs, ws, ys);
  const ConvResults e = run_conv(*backend(false), p, x, w, dy, xs, ws, ys);
  const std::vector<std::pair<const char*, std::pair<const Vec*, const Vec*>>> parts = {
      {"forward", {&t.y, &ry}}, {"data gradient", {&t.dx, &rdx}}, {"weight gradient", {&t.dw, &rdw}}};
  const Vec* exact[] = {&e.y, &e.dx, &e.dw};
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto& [name, pair] = parts[i];
    const double tf32_error = ref::max_relative_error(*pair.first, *pair.second);
    const double exact_error = ref::max_relative_error(*exact[i], *pair.second);
    EXPECT_LE(exact_error, 1e-5) << name << ": the default backend is exact f32";
    EXPECT_LE(tf32_error, 5e-3) << name << ": within TF32's rounding";
    // 576 to 2048 products a sum, each input rounded by up to 2^-11: well above f32's rounding.
    EXPECT_GE(tf32_error, 2e-5) << name << ": as exact as f32, so the tensor cores did not run";
  }
}

TEST_F(CudaTf32, LinearLayersRunOnTf32WithinItsRounding) {
  const Shape xs = {64, 1024}, ws = {256, 1024}, ys = {64, 256};
  const Vec x = random_values(xs, 4, DType::f32), w = random_values(ws, 5, DType::f32);
  const Vec want = ref::linear_forward(x, xs, w, ws, nullptr);
  double error[2];
  for (const bool tf32 : {false, true}) {
    auto be = backend(tf32);
    Tensor y = poisoned(*be, ys, DType::f32);
    be->ops().linear_forward(device_tensor(*be, x, xs, DType::f32), device_tensor(*be, w, ws, DType::f32), Tensor(), y);
    error[tf32] = ref::max_relative_error(read(y), want);
  }
  EXPECT_LE(error[0], 1e-5) << "exact f32";
  EXPECT_LE(error[1], 5e-3) << "TF32";
  EXPECT_GE(error[1], 2e-5) << "TF32 as exact as f32: cuBLAS did not use the tensor cores";
}

// fmnet's training step in TF32 channels-last against the exact f32 nchw step: logits within
// TF32's rounding, and every parameter gradient within 0.1 (measured on the H200: up to 6.6%,
// batch norm at initialization amplifies rounding towards the input; exact f32 nhwc against nchw
// is allowed 5% by the layout tests for max pooling's near-ties alone). TF32 keeps 10 mantissa
// bits to bf16's 7: its step must also be closer to the exact one than the bf16 step is.
TEST_F(CudaTf32, AModelStepInTf32IsTheExactStepWithinItsRounding) {
  using convoy::testing::grad_errors;
  using convoy::testing::model_step;
  using convoy::testing::relative_difference;
  auto exact = backend(false);
  const convoy::testing::ModelStep ref = model_step(*exact, "fmnet.yaml", DType::f32, Layout::nchw);
  const convoy::testing::ModelStep bf16 = model_step(*exact, "fmnet.yaml", DType::bf16, Layout::nhwc);
  const convoy::testing::ModelStep t = model_step(*backend(true), "fmnet.yaml", DType::f32, Layout::nhwc);
  const double logits = relative_difference(t.logits, ref.logits);
  EXPECT_LE(logits, 1e-2) << "logits";
  EXPECT_LE(relative_difference(t.eval_logits, ref.eval_logits), 1e-2) << "evaluation logits";
  EXPECT_LT(logits, relative_difference(bf16.logits, ref.logits)) << "TF32 logits no closer than bf16's";
  const std::vector<double> err = grad_errors(t, ref), bf16_err = grad_errors(bf16, ref);
  double sum = 0, bf16_sum = 0;
  for (size_t i = 0; i < ref.grads.size(); ++i) {
    EXPECT_LE(err[i], 0.1) << "gradient of " << ref.grads[i].first;
    sum += err[i];
    bf16_sum += bf16_err[i];
  }
  EXPECT_LT(sum, bf16_sum) << "TF32 gradients no closer to the exact ones than bf16's, on average";
}

}  // namespace
