// Squeeze-and-excitation on the GPU: a training step of the shipped mobilenet_v3_small
// (hardsigmoid) and efficientnet_b0 (sigmoid, SiLU) on CUDA gives the CPU's logits and gradients
// in both layouts (the mul layer's kernels, channel_scale.cu, in a real network), and
// GraphedForward's recording of efficientnet_b0 (what `convoy infer` and `serve` replay on a GPU)
// gives the layer-by-layer forward, in f32 and bf16 channels-last.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/graph/model.h"
#include "engine/inference/graphed_forward.h"
#include "tests/model_step.h"

using namespace convoy;

namespace {

class CudaSqueezeExcitation : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  }
};

using convoy::testing::l2_norm;
using convoy::testing::model_step;
using convoy::testing::relative_difference;

// Each gradient's error against the CPU's, relative to its own size, or to 1e-3 of its layer's
// weight gradient where it is smaller: the bias gradient of an excitation's second convolution
// is about 1e-6 of its weights' (the gate of a channel moves every sample alike, and the batch
// norm after the projection takes most of that back), so both sides' values are float32 rounding
// and their relative difference is about 1 on the CPU's own fused against unfused step too.
std::vector<double> grad_errors_with_floor(const convoy::testing::ModelStep& got,
                                           const convoy::testing::ModelStep& ref) {
  std::map<std::string, double> norms;
  for (const auto& [name, g] : ref.grads) norms[name] = l2_norm(g);
  std::vector<double> out;
  for (size_t i = 0; i < ref.grads.size(); ++i) {
    const std::string& name = ref.grads[i].first;
    const std::string weight =
        name.ends_with(".bias") ? name.substr(0, name.size() - std::string(".bias").size()) + ".weight" : "";
    const auto w = norms.find(weight);
    out.push_back(relative_difference(got.grads[i].second, ref.grads[i].second,
                                      w == norms.end() ? convoy::testing::kNormFloor : 1e-3 * w->second));
  }
  return out;
}

TEST_F(CudaSqueezeExcitation, TrainingStepMatchesTheCpuInBothLayouts) {
  auto cpu = make_cpu_backend({});
  auto gpu = make_cuda_backend(0, BackendOptions{});
  for (const char* file : {"mobilenet_v3_small.yaml", "efficientnet_b0.yaml"}) {
    SCOPED_TRACE(file);
    const convoy::testing::ModelStep ref = model_step(*cpu, file, DType::f32, Layout::nchw, true, 4);
    for (const Layout layout : {Layout::nchw, Layout::nhwc}) {
      SCOPED_TRACE(layout == Layout::nchw ? "nchw" : "nhwc");
      const convoy::testing::ModelStep got = model_step(*gpu, file, DType::f32, layout, true, 4);
      // f32 in another summation order (cuDNN's algorithms, the kernels' plane sums).
      EXPECT_LE(relative_difference(got.logits, ref.logits), 1e-3);
      const std::vector<double> err = grad_errors_with_floor(got, ref);
      for (size_t i = 0; i < err.size(); ++i) EXPECT_LE(err[i], 1e-2) << "gradient of " << ref.grads[i].first;
    }
  }
}

TEST_F(CudaSqueezeExcitation, GraphedForwardOfEfficientNetEqualsTheLayerForward) {
  auto gpu = make_cuda_backend(0, BackendOptions{});
  for (const DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype == DType::f32 ? "f32" : "bf16");
    Model m = Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/efficientnet_b0.yaml", 11);
    m.to(*gpu, dtype, Layout::nhwc);
    const Shape shape{2, 3, 224, 224};
    std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
    std::mt19937 rng(4);
    std::normal_distribution<float> normal(0.f, 1.f);
    for (float& e : v) e = normal(rng);
    Tensor x = gpu->empty(shape, dtype, Layout::nhwc);
    gpu->ops().cast(gpu->upload(Tensor::from_floats(v, shape)), x);
    GraphedForward graphed(*gpu, m);
    const std::vector<float> replayed = graphed.run(x).to_floats();
    EXPECT_TRUE(graphed.last_run_replayed());
    // After the recording, so that both use the convolution plans its first pass chose.
    EXPECT_EQ(replayed, m.forward(*gpu, x, StepInfo{}).to_floats());
  }
}

}  // namespace
