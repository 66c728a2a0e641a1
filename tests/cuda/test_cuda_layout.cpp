// Channels-last training on the GPU (Model::to with Layout::nhwc, what `convoy train` uses in
// bf16) computes the same step as nchw: same logits, loss gradients and parameter gradients.
// lenet5 exercises a flatten of spatial activations (the nhwc -> nchw conversion), fmnet the
// global pooling into a linear layer. In f32 the two layouts differ only in the order of sums
// (cuDNN's algorithms, batch norm by cuDNN in nchw and by Convoy's kernels in nhwc) and what
// that does to max pooling's near-ties; in bf16 also in where values are rounded. A scrambled
// layout is off by ~1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/graph/model.h"
#include "tests/model_step.h"

using namespace convoy;

namespace {

class CudaLayout : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  }
};

using Step = convoy::testing::ModelStep;
using convoy::testing::grad_errors;
using convoy::testing::relative_difference;

Step train_step(Backend& be, const std::string& model_file, DType dtype, Layout layout) {
  return convoy::testing::model_step(be, model_file, dtype, layout);
}

// The reference is the f32 nchw step. f32 nhwc must match it to summation order; bf16 nhwc
// must be about as close to it as bf16 nchw is (bf16 rounding through a deep net at
// initialization, batch norm amplifying it towards the input, leaves percents either way).
void expect_same_step(const std::string& model_file) {
  SCOPED_TRACE(model_file);
  auto be = make_cuda_backend(0, BackendOptions{});
  const Step ref = train_step(*be, model_file, DType::f32, Layout::nchw);
  const Step f32 = train_step(*be, model_file, DType::f32, Layout::nhwc);
  EXPECT_LE(relative_difference(f32.logits, ref.logits), 1e-3) << "f32 logits";
  // Gradients get 5e-2: summation order decides near-ties of max pooling, and a flipped
  // argmax routes a gradient elsewhere (seen once in eight runs: 2% on lenet5, where cuDNN's
  // timed algorithm choice differed).
  const std::vector<double> f32_err = grad_errors(f32, ref);
  for (size_t i = 0; i < ref.grads.size(); ++i)
    EXPECT_LE(f32_err[i], 5e-2) << "f32 gradient of " << ref.grads[i].first;

  const Step bf16_nchw = train_step(*be, model_file, DType::bf16, Layout::nchw);
  const Step bf16_nhwc = train_step(*be, model_file, DType::bf16, Layout::nhwc);
  const double logits_nchw = relative_difference(bf16_nchw.logits, ref.logits);
  EXPECT_LE(relative_difference(bf16_nhwc.logits, ref.logits), std::max(2 * logits_nchw, 2e-2)) << "bf16 logits";
  const std::vector<double> nchw_err = grad_errors(bf16_nchw, ref), nhwc_err = grad_errors(bf16_nhwc, ref);
  for (size_t i = 0; i < ref.grads.size(); ++i)
    EXPECT_LE(nhwc_err[i], std::max(2 * nchw_err[i], 5e-2))
        << "bf16 gradient of " << ref.grads[i].first << ": nchw is off by " << nchw_err[i];
}

TEST_F(CudaLayout, ChannelsLastLenet5MatchesNchw) { expect_same_step("lenet5.yaml"); }

TEST_F(CudaLayout, ChannelsLastFmnetMatchesNchw) { expect_same_step("fmnet.yaml"); }

}  // namespace
