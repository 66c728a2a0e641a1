// The GPU's convolution plans: reduced precision runs on cuDNN's graph API (GraphConvPlan),
// f32 and CudaTunables::cudnn_graph off (CONVOY_CUDNN_GRAPH=0) on the legacy calls. The two
// agree, and a plan made for one use of a shape is not taken for another (the graph API bakes an
// accumulation's beta in).
// Narrow stems run as im2col + a cuBLAS GEMM (CudaTunables::stem_gemm off: cuDNN); the two agree.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "engine/backends/backend.h"
#include "engine/ops/conv2d.h"
#include "ops/op_cases.h"
#include "reference/reference_ops.h"

using namespace convoy;
using namespace convoy::optest;

namespace {

class CudaConvPlans : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  }
};

struct Conv {
  Conv2dParams p;
  Shape xs, ws, ys;
};

// A 3x3 convolution, stride 1, padding 1: (4, 16, 10, 10) -> (4, 32, 10, 10).
Conv conv3x3() {
  Conv c;
  c.p.pad_h = c.p.pad_w = 1;
  c.xs = {4, 16, 10, 10};
  c.ws = {32, 16, 3, 3};
  c.ys = {4, 32, 10, 10};
  return c;
}

// The three convolutions of one shape on `backend`, bf16 channels-last, as doubles.
struct Results {
  Vec y, dx, dw;
};
Results run_three(Backend& be, const Conv& c) {
  const Vec x = random_values(c.xs, 1, DType::bf16), w = random_values(c.ws, 2, DType::bf16),
            dy = random_values(c.ys, 3, DType::bf16);
  const Tensor tx = device_tensor(be, x, c.xs, DType::bf16, Layout::nhwc);
  const Tensor tw = device_tensor(be, w, c.ws, DType::bf16, Layout::nhwc);
  const Tensor tdy = device_tensor(be, dy, c.ys, DType::bf16, Layout::nhwc);
  Tensor y = poisoned(be, c.ys, DType::bf16, Layout::nhwc), dx = poisoned(be, c.xs, DType::bf16, Layout::nhwc),
         dw = poisoned(be, c.ws, DType::bf16, Layout::nhwc), none;
  be.ops().conv2d_forward(c.p, tx, tw, Tensor(), y);
  be.ops().conv2d_backward_data(c.p, tdy, tw, dx);
  be.ops().conv2d_backward_weights(c.p, tx, tdy, dw, none);
  return {read(y), read(dx), read(dw)};
}

// A CUDA backend made with one of CudaTunables' switches off.
std::unique_ptr<Backend> backend_with_off(bool CudaTunables::*tunable) {
  BackendOptions options;
  options.cuda.*tunable = false;
  return make_cuda_backend(0, options);
}

TEST_F(CudaConvPlans, GraphApiPlansAgreeWithTheLegacyCallsAndTheReference) {
  const Conv c = conv3x3();
  const Results a = run_three(*make_cuda_backend(0, BackendOptions{}), c),
                b = run_three(*backend_with_off(&CudaTunables::cudnn_graph), c);
  const Vec x = random_values(c.xs, 1, DType::bf16), w = random_values(c.ws, 2, DType::bf16),
            dy = random_values(c.ys, 3, DType::bf16);
  // bf16 results of f32 sums: within the op tests' bf16 bound (cases_conv.cpp) of each other.
  EXPECT_EQ(compare(a.y, b.y, 2e-2), "") << "forward";
  EXPECT_EQ(compare(a.dx, b.dx, 2e-2), "") << "data gradient";
  EXPECT_EQ(compare(a.dw, b.dw, 2e-2), "") << "weight gradient";
  EXPECT_EQ(compare(a.y, ref::conv2d_forward(c.p, x, c.xs, w, c.ws, nullptr), 2e-2), "");
  EXPECT_EQ(compare(a.dx, ref::conv2d_backward_data(c.p, dy, c.ys, w, c.ws, c.xs), 2e-2), "");
}

// A residual join's data gradient accumulates (beta = 1) where the same shape elsewhere
// overwrites (beta = 0): each call gets what it asked for, in any order.
TEST_F(CudaConvPlans, AnAccumulatingDataGradientAndAPlainOneOfOneShapeKeepTheirOwnBeta) {
  const Conv c = conv3x3();
  const Vec w = random_values(c.ws, 2, DType::bf16), dy = random_values(c.ys, 3, DType::bf16),
            start = random_values(c.xs, 4, DType::bf16);
  Vec want = ref::conv2d_backward_data(c.p, dy, c.ys, w, c.ws, c.xs);
  Vec want_sum = want;
  for (size_t i = 0; i < want_sum.size(); ++i) want_sum[i] += start[i];
  for (const bool accumulate_first : {false, true}) {
    SCOPED_TRACE(accumulate_first ? "accumulating first" : "plain first");
    auto fresh = make_cuda_backend(0, BackendOptions{});
    const Tensor fw = device_tensor(*fresh, w, c.ws, DType::bf16, Layout::nhwc);
    const Tensor fdy = device_tensor(*fresh, dy, c.ys, DType::bf16, Layout::nhwc);
    for (int round = 0; round < 2; ++round) {
      const bool accumulate = (round == 0) == accumulate_first;
      Tensor dx = accumulate ? device_tensor(*fresh, start, c.xs, DType::bf16, Layout::nhwc)
                             : poisoned(*fresh, c.xs, DType::bf16, Layout::nhwc);
      fresh->ops().conv2d_backward_data(c.p, fdy, fw, dx, accumulate);
      EXPECT_EQ(compare(read(dx), accumulate ? want_sum : want, 2e-2), "") << (accumulate ? "dx += " : "dx = ");
    }
  }
}

// ResNet's stem, 7x7/2 over 3 channels, at a size with thousands of matrix rows: im2col + GEMM
// (forward and weight gradient) against cuDNN (CudaTunables::stem_gemm off) and the float64 reference.
TEST_F(CudaConvPlans, AStemAsIm2colAndGemmAgreesWithCudnnAndTheReference) {
  Conv c;
  c.p.stride_h = c.p.stride_w = 2;
  c.p.pad_h = c.p.pad_w = 3;
  c.xs = {8, 3, 64, 62};
  c.ws = {64, 3, 7, 7};
  c.ys = {8, 64, 32, 31};
  const Results a = run_three(*make_cuda_backend(0, BackendOptions{}), c),
                b = run_three(*backend_with_off(&CudaTunables::stem_gemm), c);
  const Vec x = random_values(c.xs, 1, DType::bf16), w = random_values(c.ws, 2, DType::bf16),
            dy = random_values(c.ys, 3, DType::bf16);
  EXPECT_EQ(compare(a.y, b.y, 2e-2), "") << "forward";
  EXPECT_EQ(compare(a.dw, b.dw, 2e-2), "") << "weight gradient";
  EXPECT_EQ(compare(a.y, ref::conv2d_forward(c.p, x, c.xs, w, c.ws, nullptr), 2e-2), "");
  EXPECT_EQ(compare(a.dw, ref::conv2d_backward_weights(c.p, x, c.xs, dy, c.ys, c.ws), 2e-2), "");
}

}  // namespace
