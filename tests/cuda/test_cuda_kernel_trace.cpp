// The CUDA backend's kernel trace (Backend::trace_kernels, CUPTI's activity records) behind
// `convoy bench --profile`: every launch counted and timed, one trace per process at a time,
// nothing where nothing ran. The tests that trace skip, with the reason, where no GPU or no
// libcupti is usable; the kernel names' shortening needs neither.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/backends/cuda/cupti_kernel_trace.h"
#include "engine/core/tensor.h"

using namespace convoy;

namespace {

class CudaKernelTrace : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
    if (auto why = cuda::cupti_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
    backend_ = make_cuda_backend(0, BackendOptions{});
    backend_->synchronize();  // whatever making it queued stays out of the traces
  }

  Tensor filled(float value) {  // (2, 8, 16, 16)
    return backend_->upload(Tensor::from_floats(std::vector<float>(2 * 8 * 16 * 16, value), {2, 8, 16, 16}));
  }

  std::unique_ptr<Backend> backend_;
};

std::string names(const std::vector<KernelTime>& kernels) {
  std::string s;
  for (const KernelTime& k : kernels) s += k.name + " x" + std::to_string(k.calls) + "; ";
  return s;
}

TEST_F(CudaKernelTrace, CountsEachLaunchOfAnOpsKernel) {
  Backend& be = *backend_;
  const Tensor a = filled(1.f), b = filled(2.f);  // (2, 8, 16, 16)
  Tensor y = be.empty(a.shape(), DType::f32);     // (2, 8, 16, 16)
  be.synchronize();
  std::string why;
  std::unique_ptr<KernelTrace> trace = be.trace_kernels(why);
  ASSERT_NE(trace, nullptr) << why;
  EXPECT_EQ(why, "");
  constexpr int kCalls = 7;
  for (int i = 0; i < kCalls; ++i) be.ops().add(a, b, y);
  be.synchronize();
  const std::vector<KernelTime> kernels = trace->stop(why);
  ASSERT_EQ(why, "");
  const auto add = std::find_if(kernels.begin(), kernels.end(),
                                [](const KernelTime& k) { return k.name.find("add") != std::string::npos; });
  ASSERT_NE(add, kernels.end()) << names(kernels);
  // One launch per call today; a multiple of the calls should the op ever take more.
  EXPECT_GE(add->calls, kCalls) << names(kernels);
  EXPECT_EQ(add->calls % kCalls, 0) << names(kernels);
  EXPECT_GT(add->total_ms, 0);
  for (const KernelTime& k : kernels) {
    EXPECT_FALSE(k.name.empty());
    EXPECT_GT(k.calls, 0) << k.name;
    EXPECT_GE(k.total_ms, 0) << k.name;
  }
  EXPECT_TRUE(std::is_sorted(kernels.begin(), kernels.end(),
                             [](const KernelTime& p, const KernelTime& q) { return p.total_ms > q.total_ms; }))
      << names(kernels);
  for (float v : y.to_floats()) ASSERT_EQ(v, 3.f);  // the traced work did run
}

TEST_F(CudaKernelTrace, OneTraceAtATimeUntilItStops) {
  Backend& be = *backend_;
  std::string why;
  std::unique_ptr<KernelTrace> first = be.trace_kernels(why);
  ASSERT_NE(first, nullptr) << why;
  std::string refused;
  EXPECT_EQ(be.trace_kernels(refused), nullptr);
  EXPECT_NE(refused.find("another kernel trace is on"), std::string::npos) << refused;
  // CUPTI is the process's, not a backend's: another backend is refused too.
  std::unique_ptr<Backend> other = make_cuda_backend(0, BackendOptions{});
  refused.clear();
  EXPECT_EQ(other->trace_kernels(refused), nullptr);
  EXPECT_FALSE(refused.empty());
  first->stop(why);
  ASSERT_EQ(why, "");
  EXPECT_TRUE(first->stop(why).empty());  // a second stop has nothing left
  EXPECT_FALSE(why.empty());

  // After the stop a new trace works, and sees its own launches only.
  why.clear();
  std::unique_ptr<KernelTrace> second = other->trace_kernels(why);
  ASSERT_NE(second, nullptr) << why;
  const Tensor a = filled(1.f);  // (2, 8, 16, 16)
  Tensor y = be.empty(a.shape(), DType::f32);
  be.ops().add(a, a, y);
  const std::vector<KernelTime> kernels = second->stop(why);  // stop() waits for the add itself
  ASSERT_EQ(why, "");
  const auto add = std::find_if(kernels.begin(), kernels.end(),
                                [](const KernelTime& k) { return k.name.find("add") != std::string::npos; });
  ASSERT_NE(add, kernels.end()) << names(kernels);
  EXPECT_GE(add->calls, 1);

  // A trace dropped without stop() frees the tracer as well.
  { EXPECT_NE(be.trace_kernels(why), nullptr) << why; }
  std::unique_ptr<KernelTrace> third = be.trace_kernels(why);
  ASSERT_NE(third, nullptr) << why;
  third->stop(why);
  EXPECT_EQ(why, "");
}

TEST_F(CudaKernelTrace, AnIdleTraceHasNoKernels) {
  std::string why;
  std::unique_ptr<KernelTrace> trace = backend_->trace_kernels(why);
  ASSERT_NE(trace, nullptr) << why;
  backend_->synchronize();
  const std::vector<KernelTime> kernels = trace->stop(why);
  EXPECT_EQ(why, "");
  EXPECT_TRUE(kernels.empty()) << names(kernels);
}

// Mangled names as g++ and nvcc write them (the Itanium ABI), and cuDNN's plain C names.
TEST(CudaKernelTraceNames, AreDemangledAndCutToATableLine) {
  using cuda::short_kernel_name;
  // Return type, anonymous namespace and parameter list dropped; the template arguments kept.
  EXPECT_EQ(short_kernel_name("_ZN6convoy7kernels12_GLOBAL__N_114add_vec_kernelIfLi4EEEvPKT_S5_PS3_lb"),
            "convoy::kernels::add_vec_kernel<float, 4>");
  EXPECT_EQ(short_kernel_name("_Z12plain_kernelPfi"), "plain_kernel");
  // Too long: the nested template lists go first.
  EXPECT_EQ(short_kernel_name("_ZN6convoy7kernels11deep_kernelINS0_4PairINS2_IfdEENS2_IixEEEELi128EEEvT_i"),
            "convoy::kernels::deep_kernel<convoy::kernels::Pair<...>, 128>");
  const std::string cudnn = "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64";
  EXPECT_EQ(short_kernel_name(cudnn.c_str()), cudnn);
  // Still too long: both ends kept, the middle cut.
  const std::string long_name = std::string("head_") + std::string(200, 'x') + "_tail";
  const std::string cut = short_kernel_name(long_name.c_str());
  EXPECT_LE(cut.size(), 96u) << cut;
  EXPECT_TRUE(cut.starts_with("head_") && cut.ends_with("_tail")) << cut;
  EXPECT_NE(cut.find("..."), std::string::npos) << cut;
  EXPECT_EQ(short_kernel_name(nullptr), "(unnamed kernel)");
  EXPECT_EQ(short_kernel_name(""), "(unnamed kernel)");
}

}  // namespace
