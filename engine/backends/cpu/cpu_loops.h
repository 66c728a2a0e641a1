#pragma once
// What the OpenMP loop files (cpu_elementwise, cpu_softmax, cpu_optimizer,
// cpu_normalize_augment) share: when to fork, how many threads, and element access over the
// floating dtypes. Internal to engine/backends/cpu.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "engine/core/error.h"
#include "engine/core/tensor.h"

namespace convoy::cpu {

// Below this many elements a loop runs on one thread: forking costs more than it saves.
inline constexpr int64_t kParallelMin = 1 << 15;

// The most threads any OpenMP team gets, whatever was asked (the run config allows 1 ... 1024).
inline constexpr int kMaxOmpThreads = 1024;

// The team size for CpuOps::threads() (0 = OpenMP's default).
inline int team(int threads) { return threads > 0 ? std::min(threads, kMaxOmpThreads) : omp_get_max_threads(); }

// Calls f(reader) with a reader(i) -> float over t's elements (f32, bf16 or f16).
template <class F>
void with_reader(const Tensor& t, F&& f) {
  switch (t.dtype()) {
    case DType::f32: {
      const float* p = t.data<float>();
      f([p](int64_t i) { return p[i]; });
      return;
    }
    case DType::bf16: {
      const uint16_t* p = t.data<uint16_t>();
      f([p](int64_t i) { return bf16_to_float(p[i]); });
      return;
    }
    case DType::f16: {
      const uint16_t* p = t.data<uint16_t>();
      f([p](int64_t i) { return f16_to_float(p[i]); });
      return;
    }
    case DType::i32:
    case DType::u8: break;
  }
  throw InternalError("expected a floating-point tensor, got " + std::string(dtype_name(t.dtype())));
}

// Calls f(writer) with a writer(i, float) into t's elements (f32, bf16 or f16).
template <class F>
void with_writer(Tensor& t, F&& f) {
  switch (t.dtype()) {
    case DType::f32: {
      float* p = t.data<float>();
      f([p](int64_t i, float v) { p[i] = v; });
      return;
    }
    case DType::bf16: {
      uint16_t* p = t.data<uint16_t>();
      f([p](int64_t i, float v) { p[i] = float_to_bf16(v); });
      return;
    }
    case DType::f16: {
      uint16_t* p = t.data<uint16_t>();
      f([p](int64_t i, float v) { p[i] = float_to_f16(v); });
      return;
    }
    case DType::i32:
    case DType::u8: break;
  }
  throw InternalError("expected a floating-point tensor, got " + std::string(dtype_name(t.dtype())));
}

}  // namespace convoy::cpu
