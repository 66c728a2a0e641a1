// Batch norm folded into the convolution on the GPU: cuDNN's graph API runs convolution, bias,
// residual add and ReLU as one kernel (Ops::conv2d_forward_fused), checked against the CPU's
// f32 on the same bf16-rounded inputs; and a folded ResNet against its unfolded forward.
#include <gtest/gtest.h>

#include <iostream>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/graph/model.h"
#include "engine/ops/conv2d.h"
#include "tests/batch_norm_stats.h"
#include "tests/model_step.h"

namespace convoy {
namespace {

using testing::relative_difference;

class CudaFold : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  }
};

// n values, normal, rounded to bf16 so both devices see the same inputs.
std::vector<float> bf16_values(int64_t n, uint32_t seed, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, scale);
  for (float& e : v) e = bf16_to_float(float_to_bf16(normal(rng)));
  return v;
}

// f32 nchw host values on the GPU in bf16 channels-last.
Tensor on_gpu_bf16(Backend& gpu, const std::vector<float>& v, const Shape& shape) {
  Tensor t = gpu.empty(shape, DType::bf16, Layout::nhwc);
  gpu.ops().cast(gpu.upload(Tensor::from_floats(v, shape)), t);
  return t;
}

struct FusedCase {
  const char* name;
  int64_t n, c, h, k, r, stride, pad;
  bool residual, relu;
};

TEST_F(CudaFold, FusedConvolutionBiasAddReluAgreesWithTheCpu) {
  auto cpu = make_cpu_backend({});
  auto gpu = make_cuda_backend(0, BackendOptions{});
  // ResNet-50's bottleneck shapes at batch 8.
  const FusedCase cases[] = {
      {"1x1 64->256 + residual + relu", 8, 64, 56, 256, 1, 1, 0, true, true},
      {"3x3 64->64 + relu", 8, 64, 56, 64, 3, 1, 1, false, true},
      {"1x1 256->64 + relu", 8, 256, 56, 64, 1, 1, 0, false, true},
      {"3x3 stride 2 128->128 + relu", 8, 128, 56, 128, 3, 2, 1, false, true},
      {"1x1 stride 2 256->512, bias only", 8, 256, 56, 512, 1, 2, 0, false, false},
  };
  int fused = 0;
  for (const FusedCase& c : cases) {
    SCOPED_TRACE(c.name);
    Conv2dParams p;
    p.stride_h = p.stride_w = c.stride;
    p.pad_h = p.pad_w = c.pad;
    const Shape xs{c.n, c.c, c.h, c.h}, ws{c.k, c.c, c.r, c.r};
    const Shape ys = conv2d_output_shape(p, xs, ws);
    const auto x = bf16_values(shape_numel(xs), 1, 1.f), w = bf16_values(shape_numel(ws), 2, 0.1f),
               b = bf16_values(c.k, 3, 0.5f), r = bf16_values(shape_numel(ys), 4, 1.f);
    // The CPU's f32: conv + bias, + residual, ReLU.
    Tensor ref(ys, DType::f32, cpu->allocator());
    const Tensor cr = Tensor::from_floats(r, ys);
    cpu->ops().conv2d_forward_fused(p, Tensor::from_floats(x, xs), Tensor::from_floats(w, ws), Tensor::from_floats(b, {c.k}),
                                    c.residual ? &cr : nullptr, c.relu, ref);
    const Tensor gx = on_gpu_bf16(*gpu, x, xs), gw = on_gpu_bf16(*gpu, w, ws), gr = on_gpu_bf16(*gpu, r, ys);
    const Tensor gb = gpu->upload(Tensor::from_floats(b, {c.k}));
    Tensor gy = gpu->empty(ys, DType::bf16, Layout::nhwc);
    if (!gpu->ops().conv2d_forward_fused(p, gx, gw, gb, c.residual ? &gr : nullptr, c.relu, gy)) {
      std::cout << "cuDNN has no fused kernel for " << c.name << "\n";
      continue;
    }
    ++fused;
    Tensor y32 = gpu->empty(ys, DType::f32);
    gpu->ops().cast(gy, y32);
    EXPECT_LE(relative_difference(y32.to_floats(), ref.to_floats()), 2e-2);
    // Twice the same: the plan is cached and replays.
    Tensor again = gpu->empty(ys, DType::bf16, Layout::nhwc);
    ASSERT_TRUE(gpu->ops().conv2d_forward_fused(p, gx, gw, gb, c.residual ? &gr : nullptr, c.relu, again));
    EXPECT_EQ(again.to_floats(), gy.to_floats());
  }
  std::cout << fused << " of " << std::size(cases) << " shapes ran as one fused cuDNN kernel\n";
  if (fused == 0) GTEST_SKIP() << "cuDNN offered no fused engine for any shape (its run-time compiled ones need NVRTC)";
}

TEST_F(CudaFold, FoldedResnetAgreesWithItsUnfoldedForward) {
  auto gpu = make_cuda_backend(0, BackendOptions{});
  Model model = Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/resnet20.yaml", 4);
  testing::randomize_batch_norms(model, 6);
  model.to(*gpu, DType::bf16, Layout::nhwc);
  const std::vector<float> v = bf16_values(16 * 3 * 32 * 32, 8, 1.f);
  const Tensor x = on_gpu_bf16(*gpu, v, {16, 3, 32, 32});
  const std::vector<float> unfolded = model.forward(*gpu, x, StepInfo{}).to_floats();
  const int folded = model.fold_batch_norms(*gpu);
  EXPECT_GE(folded, 19) << "resnet20's convolutions each feed a batch norm";
  const std::vector<float> with_fold = model.forward(*gpu, x, StepInfo{}).to_floats();
  EXPECT_LE(relative_difference(with_fold, unfolded), 3e-2);
  std::cout << folded << " batch norms folded; folded vs unfolded logits: relative difference "
            << relative_difference(with_fold, unfolded) << "\n";
}

}  // namespace
}  // namespace convoy
