// The 8-bit plan's own kernels (kernels/eight_bit.cu) against float64 references, int8 and FP8
// e4m3, each within its type's rounding bound: quantization (plain, and with a bias and ReLU
// first) to at most half a step of the exact scaled value or saturated at the type's largest;
// dequantization and the global average pool to bf16's rounding; max pooling exactly (padding
// ignored). The convolutions are tests/cuda/test_quantized_conv.cpp's, the whole plan
// tests/cuda/test_eight_bit_plan.cpp's.
#include <gtest/gtest.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/backends/backend.h"
#include "kernels/eight_bit.cuh"

namespace convoy {
namespace {

using kernels::Byte8;

double e4m3_value(uint8_t b) {
  const int sign = b >> 7, exponent = (b >> 3) & 0xF, mantissa = b & 7;
  const double magnitude = exponent == 0 ? std::ldexp(mantissa / 8.0, -6) : std::ldexp(1 + mantissa / 8.0, exponent - 7);
  return sign ? -magnitude : magnitude;
}
double byte_value(uint8_t b, Byte8 t) { return t == Byte8::int8 ? static_cast<int8_t>(b) : e4m3_value(b); }
// Half the spacing of the type's values around |v| (int8: 0.5; e4m3: 3 mantissa bits, subnormal
// spacing 2^-9 below 2^-6).
double half_step(double v, Byte8 t) {
  if (t == Byte8::int8) return 0.5;
  const double a = std::fabs(v);
  if (a < std::ldexp(1.0, -6)) return std::ldexp(1.0, -10);
  return std::ldexp(1.0, static_cast<int>(std::floor(std::log2(a))) - 4);
}
double type_max(Byte8 t) { return t == Byte8::int8 ? 127.0 : 448.0; }

uint16_t to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
}
double from_bf16(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

class EightBitKernels : public ::testing::TestWithParam<Byte8> {
 protected:
  void SetUp() override {
    // cuda_fp8.h's conversions run on any GPU: only FP8 tensor cores need compute capability 8.9.
    if (auto why = cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  }
  void TearDown() override {
    for (void* p : buffers_) cudaFree(p);
  }
  template <class T>
  T* device(const std::vector<T>& v) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(v.size(), 1) * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    buffers_.push_back(p);
    return static_cast<T*>(p);
  }
  template <class T>
  std::vector<T> host(const T* p, size_t n) {
    std::vector<T> v(n);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
  // Random bytes that are values of the type (no e4m3 NaN).
  std::vector<uint8_t> random_bytes(size_t n, std::mt19937& rng) {
    std::vector<uint8_t> b(n);
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& v : b) {
      do v = static_cast<uint8_t>(byte(rng));
      while (GetParam() == Byte8::e4m3 ? (v & 0x7F) == 0x7F : v == 0x80);  // e4m3 NaN; int8 -128
    }
    return b;
  }
  std::vector<void*> buffers_;
};

// The byte is the type's rounding of `exact` (within half a step), or its saturation.
void expect_rounded(uint8_t got, double exact, Byte8 t, const std::string& where) {
  const double v = byte_value(got, t);
  if (std::fabs(exact) >= type_max(t)) {
    EXPECT_EQ(v, std::copysign(type_max(t), exact)) << where << ": " << exact << " not saturated";
  } else {
    EXPECT_LE(std::fabs(v - exact), half_step(exact, t) * (1 + 1e-6) + 1e-9) << where << ": " << exact << " -> " << v;
  }
}

TEST_P(EightBitKernels, QuantizeRoundsToTheNearestValueAndSaturates) {
  const Byte8 t = GetParam();
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.f, 2.f);
  const int64_t n = 5000, c = 40;
  std::vector<uint16_t> x(n);
  std::vector<float> bias(c);
  for (auto& v : x) v = to_bf16(dist(rng));
  for (auto& b : bias) b = dist(rng) / 2;
  const float scale = t == Byte8::int8 ? 30.f : 90.f;  // some values past the type's largest
  uint16_t* dx = device(x);
  float* dbias = device(bias);
  uint8_t* dy = device(std::vector<uint8_t>(n));
  uint8_t* dz = device(std::vector<uint8_t>(n));
  kernels::quantize_bf16(dx, dy, n, scale, t, nullptr);
  kernels::bias_relu_quantize_bf16(dx, dbias, dz, n, c, true, scale, t, nullptr);
  const std::vector<uint8_t> y = host(dy, n), z = host(dz, n);
  int saturated = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double xv = from_bf16(x[i]);
    expect_rounded(y[i], xv * scale, t, "quantize " + std::to_string(i));
    const double pre = std::max(0.0, xv + static_cast<double>(bias[i % c]));
    // The kernel adds in f32: the sum's own rounding (2^-24 relative) moves it by far less than a step.
    expect_rounded(z[i], pre * scale, t, "bias_relu_quantize " + std::to_string(i));
    saturated += std::fabs(xv * scale) >= type_max(t);
  }
  EXPECT_GT(saturated, 0) << "no value tested the saturation";
}

TEST_P(EightBitKernels, DequantizeAndTheGlobalAveragePoolAreWithinBf16sRounding) {
  const Byte8 t = GetParam();
  std::mt19937 rng(2);
  const int64_t n = 3, hw = 49, c = 72;
  const std::vector<uint8_t> x = random_bytes(n * hw * c, rng);
  const float inv = 0.0173f;
  uint8_t* dx = device(x);
  uint16_t* dd = device(std::vector<uint16_t>(x.size()));
  uint16_t* dp = device(std::vector<uint16_t>(n * c));
  kernels::dequantize_to_bf16(dx, dd, static_cast<int64_t>(x.size()), inv, t, nullptr);
  kernels::global_avg_pool_8bit(dx, dp, n, hw, c, inv, t, nullptr);
  const std::vector<uint16_t> d = host(dd, x.size()), p = host(dp, n * c);
  for (size_t i = 0; i < x.size(); ++i) {
    const double exact = byte_value(x[i], t) * inv;
    EXPECT_LE(std::fabs(from_bf16(d[i]) - exact), std::fabs(exact) * 0x1p-8 * 1.0001 + 1e-30) << i;
  }
  for (int64_t img = 0; img < n; ++img)
    for (int64_t ch = 0; ch < c; ++ch) {
      double sum = 0;
      for (int64_t j = 0; j < hw; ++j) {
        const double v = byte_value(x[(img * hw + j) * c + ch], t);
        sum += v;
      }
      const double exact = sum / hw * inv;
      // bf16's rounding of the mean (half an 8-bit ulp): the f32 sum is exact for both types (int8
      // integers; 49 e4m3 values, multiples of 2^-9 below 2^14, fit f32's 24 bits), the scaling
      // rounds twice more at 2^-24.
      const double bound = std::fabs(exact) * (0x1p-8 + 0x1p-22);
      EXPECT_LE(std::fabs(from_bf16(p[img * c + ch]) - exact), bound * 1.0001) << img << " " << ch;
    }
}

TEST_P(EightBitKernels, MaxPoolingPicksTheLargestValueOfEachWindowIgnoringPadding) {
  const Byte8 t = GetParam();
  std::mt19937 rng(3);
  struct Shape2 { int64_t n, h, w, c; int k, s, pad; };
  for (const Shape2 sh : {Shape2{2, 9, 11, 32, 3, 2, 1}, Shape2{1, 8, 8, 16, 2, 2, 0}}) {
    const int64_t p = (sh.h + 2 * sh.pad - sh.k) / sh.s + 1, q = (sh.w + 2 * sh.pad - sh.k) / sh.s + 1;
    const std::vector<uint8_t> x = random_bytes(sh.n * sh.h * sh.w * sh.c, rng);
    uint8_t* dx = device(x);
    uint8_t* dy = device(std::vector<uint8_t>(sh.n * p * q * sh.c));
    kernels::max_pool_8bit(dx, dy, sh.n, sh.h, sh.w, sh.c, p, q, sh.k, sh.k, sh.s, sh.s, sh.pad, sh.pad, t, nullptr);
    const std::vector<uint8_t> y = host(dy, sh.n * p * q * sh.c);
    for (int64_t img = 0; img < sh.n; ++img)
      for (int64_t oy = 0; oy < p; ++oy)
        for (int64_t ox = 0; ox < q; ++ox)
          for (int64_t ch = 0; ch < sh.c; ++ch) {
            double best = -1e300;
            for (int r = 0; r < sh.k; ++r)
              for (int s = 0; s < sh.k; ++s) {
                const int64_t iy = oy * sh.s - sh.pad + r, ix = ox * sh.s - sh.pad + s;
                if (iy < 0 || iy >= sh.h || ix < 0 || ix >= sh.w) continue;
                best = std::max(best, byte_value(x[((img * sh.h + iy) * sh.w + ix) * sh.c + ch], t));
              }
            EXPECT_EQ(byte_value(y[((img * p + oy) * q + ox) * sh.c + ch], t), best) << img << " " << oy << " " << ox;
          }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, EightBitKernels, ::testing::Values(Byte8::int8, Byte8::e4m3),
                         [](const auto& info) { return std::string(info.param == Byte8::int8 ? "int8" : "fp8"); });

}  // namespace
}  // namespace convoy
