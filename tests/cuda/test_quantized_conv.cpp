// 8-bit convolutions on the GPU (issue 37): int8 and FP8 (e4m3) convolutions as cuDNN graphs
// with the requantizing epilogue in the same kernel (x per-channel scale, + bias, + residual x its
// scale, ReLU, rounded and saturated to 8 bits), against a float64 reference of the same
// arithmetic. The bounds are the quantization's own: int8 products are summed exactly (int32),
// so the GPU may differ from the reference only where f32 rounding in the epilogue moves a value
// across a rounding boundary (one step, rarely); Hopper's FP8 tensor cores keep about 14 mantissa
// bits while they accumulate (DeepSeek-V3's report, 3.3.2), so a sum whose products cancel can be
// off by ~2^-14 of their magnitudes: one e4m3 step of the result plus 2^-12 of the magnitudes of
// everything summed (seen on the H200, cuDNN 9.14: up to 0.015 where the sum was 0.03 and the
// magnitudes ~300; exact where nothing cancels).
#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <iostream>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/backends/cuda/cudnn_graph_conv.h"

using namespace convoy;
using namespace convoy::cuda;

namespace {

// An e4m3 byte's value (no infinities; 0x7F/0xFF are NaN and never generated here).
double e4m3_value(uint8_t b) {
  const int sign = b >> 7, exponent = (b >> 3) & 0xF, mantissa = b & 7;
  const double magnitude = exponent == 0 ? std::ldexp(mantissa / 8.0, -6) : std::ldexp(1 + mantissa / 8.0, exponent - 7);
  return sign ? -magnitude : magnitude;
}
// The spacing of e4m3 values around |v| (3 mantissa bits; subnormals below 2^-6).
double e4m3_step(double v) {
  const double a = std::fabs(v);
  if (a < std::ldexp(1.0, -6)) return std::ldexp(1.0, -9);
  return std::ldexp(1.0, static_cast<int>(std::floor(std::log2(a))) - 3);
}

struct Case {
  const char* name;
  int64_t n, c, h, w, k, r, stride;
  bool residual, relu;
  int64_t pad() const { return r / 2; }
  int64_t oh() const { return (h + 2 * pad() - r) / stride + 1; }
  int64_t ow() const { return (w + 2 * pad() - r) / stride + 1; }
};

const Case kCases[] = {
    {"1x1", 2, 64, 7, 7, 32, 1, 1, false, true},
    {"3x3 + residual", 2, 32, 9, 9, 64, 3, 1, true, true},
    {"3x3 stride 2, no ReLU", 3, 16, 10, 10, 16, 3, 2, false, false},
    {"1x1 stride 2 + residual, no ReLU", 1, 64, 8, 8, 128, 1, 2, true, false},
};

template <class T>
T* device_copy(const std::vector<T>& v) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, v.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return static_cast<T*>(p);
}

class CudaQuantizedConv : public ::testing::TestWithParam<QuantType> {
 protected:
  void SetUp() override {
    if (auto why = cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
    cudaDeviceProp prop{};
    ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    if (auto why = quant_unsupported_reason(GetParam(), prop.major, prop.minor); !why.empty()) GTEST_SKIP() << why;
    ASSERT_EQ(cudnnCreate(&handle_), CUDNN_STATUS_SUCCESS);
  }
  void TearDown() override {
    for (void* p : buffers_) cudaFree(p);
    if (handle_) cudnnDestroy(handle_);
  }
  template <class T>
  T* upload(const std::vector<T>& v) {
    T* p = device_copy(v);
    buffers_.push_back(p);
    return p;
  }

  cudnnHandle_t handle_ = nullptr;
  std::vector<void*> buffers_;
};

TEST_P(CudaQuantizedConv, FusedEpilogueAgreesWithTheFloat64ReferenceWithinTheQuantizationBound) {
  const QuantType q = GetParam();
  std::mt19937 rng(37);
  // 8-bit values as the GPU reads them, and their values as doubles.
  auto random_bytes = [&](size_t n, std::vector<double>& values) {
    std::vector<uint8_t> bytes(n);
    values.resize(n);
    std::uniform_int_distribution<int> int8(-127, 127), byte(0, 255);
    for (size_t i = 0; i < n; ++i) {
      if (q == QuantType::int8) {
        const int v = int8(rng);
        bytes[i] = static_cast<uint8_t>(static_cast<int8_t>(v));
        values[i] = v;
      } else {
        // e4m3 values up to 2^3 in magnitude (exponent field <= 10): sums stay far from 448.
        uint8_t b;
        do b = static_cast<uint8_t>(byte(rng)); while (((b >> 3) & 0xF) > 10);
        bytes[i] = b;
        values[i] = e4m3_value(b);
      }
    }
    return bytes;
  };
  for (const Case& cs : kCases) {
    SCOPED_TRACE(std::string(quant_name(q)) + " " + cs.name);
    const int64_t oh = cs.oh(), ow = cs.ow(), taps = cs.c * cs.r * cs.r;
    std::vector<double> xv, wv, rv;
    // Channels-last: x (n, h, w, c), w (k, r, s, c), y and the residual (n, oh, ow, k).
    const auto x = random_bytes(cs.n * cs.h * cs.w * cs.c, xv);
    const auto w = random_bytes(cs.k * cs.r * cs.r * cs.c, wv);
    const auto residual = random_bytes(cs.n * oh * ow * cs.k, rv);
    // Scales that spread the outputs over the 8-bit range: a sum of `taps` products has a spread
    // of about sqrt(taps) times one product's.
    const double product = q == QuantType::int8 ? 73.0 * 73.0 : 3.0 * 3.0;
    const double target = q == QuantType::int8 ? 30.0 : 40.0;
    std::uniform_real_distribution<float> spread(0.5f, 1.5f), bias_dist(-10.f, 10.f), res_dist(0.2f, 1.f);
    std::vector<float> scale(cs.k), bias(cs.k), residual_scale(cs.k);
    for (int64_t k = 0; k < cs.k; ++k) {
      scale[k] = static_cast<float>(target / (std::sqrt(static_cast<double>(taps)) * product)) * spread(rng);
      bias[k] = bias_dist(rng);
      residual_scale[k] = q == QuantType::int8 ? res_dist(rng) / 4 : res_dist(rng);
    }

    GraphConvSpec spec;
    spec.quantized = q;
    spec.x = {cs.n, cs.c, cs.h, cs.w};
    spec.w = {cs.k, cs.c, cs.r, cs.r};
    spec.y = {cs.n, cs.k, oh, ow};
    spec.x_layout = spec.w_layout = spec.y_layout = Layout::nhwc;
    spec.pad = {cs.pad(), cs.pad()};
    spec.stride = {cs.stride, cs.stride};
    spec.dilation = {1, 1};
    spec.bias = true;
    spec.residual = cs.residual;
    spec.relu = cs.relu;
    uint8_t* dx = upload(x);
    uint8_t* dw = upload(w);
    uint8_t* dres = upload(residual);
    float* dscale = upload(scale);
    float* dbias = upload(bias);
    float* drscale = upload(residual_scale);
    uint8_t* dy = upload(std::vector<uint8_t>(cs.n * oh * ow * cs.k, 0x5A));  // poisoned
    GraphConvChoice choice;
    choice.workspace_limit = size_t(256) << 20;
    choice.runtime_compiled = 1;  // cuDNN 9.14's fused 8-bit engines are all compiled at run time
    const GraphConvOperands operands{dbias, cs.residual ? dres : nullptr, dscale, cs.residual ? drscale : nullptr};
    auto plan = GraphConvPlan::build(
        handle_, spec, choice, dx, dw, dy,
        [&](size_t bytes) {
          void* p = nullptr;
          if (bytes && cudaMalloc(&p, bytes) == cudaSuccess) buffers_.push_back(p);
          return p;
        },
        operands);
    ASSERT_NE(plan, nullptr) << "cuDNN built no " << quant_name(q) << " plan for this convolution";
    void* ws = nullptr;
    if (plan->workspace()) {
      ASSERT_EQ(cudaMalloc(&ws, plan->workspace()), cudaSuccess);
      buffers_.push_back(ws);
    }
    plan->run(handle_, dx, dw, dy, ws, operands);
    std::vector<uint8_t> y(cs.n * oh * ow * cs.k);
    ASSERT_EQ(cudaMemcpy(y.data(), dy, y.size(), cudaMemcpyDeviceToHost), cudaSuccess);

    int64_t exact = 0, within_bound = 0, worse = 0, nonzero = 0, saturated = 0;
    for (int64_t n = 0; n < cs.n; ++n)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox)
          for (int64_t k = 0; k < cs.k; ++k) {
            double acc = 0, magnitude = 0;  // exact: products of 8-bit values summed in float64
            for (int64_t r = 0; r < cs.r; ++r)
              for (int64_t s = 0; s < cs.r; ++s) {
                const int64_t iy = oy * cs.stride - cs.pad() + r, ix = ox * cs.stride - cs.pad() + s;
                if (iy < 0 || iy >= cs.h || ix < 0 || ix >= cs.w) continue;
                for (int64_t c = 0; c < cs.c; ++c) {
                  const double xw = xv[((n * cs.h + iy) * cs.w + ix) * cs.c + c] * wv[((k * cs.r + r) * cs.r + s) * cs.c + c];
                  acc += xw;
                  magnitude += std::fabs(xw);
                }
              }
            const int64_t at = ((n * oh + oy) * ow + ox) * cs.k + k;
            double v = acc * scale[k] + bias[k];
            double terms = magnitude * scale[k] + std::fabs(bias[k]);
            if (cs.residual) {
              v += rv[at] * residual_scale[k];
              terms += std::fabs(rv[at] * residual_scale[k]);
            }
            if (cs.relu) v = std::max(v, 0.0);
            double got, step;
            if (q == QuantType::int8) {
              const double want = std::clamp(std::nearbyint(v), -128.0, 127.0);
              saturated += want != std::nearbyint(v);
              got = static_cast<int8_t>(y[at]);
              v = want;
              step = 1;
            } else {
              got = e4m3_value(y[at]);
              step = e4m3_step(v);
            }
            nonzero += got != 0;
            const double diff = std::fabs(got - v);
            const double bound = q == QuantType::int8 ? step : step + std::ldexp(terms, -12);
            if (diff == 0 || (q != QuantType::int8 && diff <= step / 2)) ++exact;
            else if (diff <= bound) ++within_bound;
            else if (++worse <= 5)
              ADD_FAILURE() << "y[n " << n << ", y " << oy << ", x " << ox << ", k " << k << "] = " << got
                            << ", the reference " << v << " (bound " << bound << ": one step " << step << ")";
          }
    const int64_t total = cs.n * oh * ow * cs.k;
    std::cout << quant_name(q) << " " << cs.name << ": " << exact << " of " << total << " as the reference rounds, "
              << within_bound << " off but within the bound, " << worse << " outside it; " << nonzero << " nonzero, " << saturated
              << " saturated\n";
    EXPECT_EQ(worse, 0) << worse << " of " << total << " outputs outside the bound";
    // Rounding differences are rare: the f32 epilogue is exact to ~1e-7 of each value.
    EXPECT_GE(exact, total * 99 / 100) << within_bound << " of " << total << " one step off";
    // The case tests something: most outputs nonzero (ReLU zeroes about half where it is on), few
    // saturated.
    EXPECT_GE(nonzero, total * (cs.relu ? 35 : 90) / 100);
    EXPECT_LE(saturated, total / 20);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaQuantizedConv, ::testing::Values(QuantType::int8, QuantType::fp8_e4m3),
                         [](const auto& info) { return std::string(quant_name(info.param)); });

// Runs everywhere (no GPU needed): which GPUs each 8-bit type is refused on, and that the
// refusal says why and what to use instead.
TEST(QuantizedConvSupport, OlderGpusAreRefusedWithTheReason) {
  EXPECT_EQ(quant_unsupported_reason(QuantType::int8, 9, 0), "");
  EXPECT_EQ(quant_unsupported_reason(QuantType::fp8_e4m3, 9, 0), "");
  EXPECT_EQ(quant_unsupported_reason(QuantType::fp8_e4m3, 8, 9), "");
  const std::string a100 = quant_unsupported_reason(QuantType::fp8_e4m3, 8, 0);
  EXPECT_NE(a100.find("8.9"), std::string::npos) << a100;
  EXPECT_NE(a100.find("this GPU has compute capability 8.0"), std::string::npos) << a100;
  EXPECT_NE(a100.find("use int8"), std::string::npos) << a100;
  EXPECT_EQ(quant_unsupported_reason(QuantType::int8, 8, 0), "");
  EXPECT_NE(quant_unsupported_reason(QuantType::int8, 6, 0).find("6.1"), std::string::npos);
}

}  // namespace
