#pragma once
// The op test cases: one table per op family (cases_<family>.cpp), one case per op call with
// its shapes and parameters, the dtypes and layouts it expands to and its tolerance. A case
// builds its inputs deterministically from seeds and either runs the op on a Backend or
// computes the float64 reference (tests/reference/) on the same values.
//
// tests/ops/test_ops.cpp runs every case on every backend of a test binary against the
// reference (and a GPU result also against the CPU's on the same inputs); tests/ops/op_perf.cpp
// times every case (Google Benchmark). No gtest here: the perf binary links this too.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/core/tensor.h"
#include "engine/ops/ops.h"
#include "tests/reference/reference_ops.h"

namespace convoy::optest {

using ref::Vec;

// What a backend computes in: the activations' dtype (the logits', the output's for
// normalize_augment, the target's for cast) and the 4-D activations' layout.
struct Variant {
  DType dtype = DType::f32;
  Layout layout = Layout::nchw;
  bool operator==(const Variant&) const = default;
};
std::string variant_str(const Variant& v);  // "bf16 nhwc"
std::string dtype_str(DType dtype);         // "bf16"

// Bounds on ref::max_relative_error (max |got - want| / max |want|) by the variant's dtype.
// bf16 keeps 8 significant bits (one rounding: 2^-9 of a value), f16 11 (2^-12).
struct Tolerance {
  double f32 = 1e-5;
  double bf16 = 2e-2;
  double f16 = 5e-3;
  // f32 on a CUDA backend, where cuDNN's and cuBLAS's algorithms (Winograd, split-K; TF32
  // stays off) sum in other orders; negative: the same as f32.
  double f32_cuda = -1;
  double of(DType dtype, Device device) const;
};
// Bit equality (NaN equals NaN): copies, casts, fills.
inline constexpr Tolerance kExact{0, 0, 0, 0};
// A bound that does not depend on the variant (an f32 result of a bf16 run, say).
constexpr Tolerance uniform_tolerance(double bound) { return {bound, bound, bound, bound}; }

// One result of a run, its values in logical (nchw) order.
struct Output {
  std::string name;
  Vec values;
  std::optional<Tolerance> tol = std::nullopt;  // replaces the case's bound for this result
  // Backends that ran the same dtype (in either layout) on the same inputs agree bit for bit
  // (dropout's mask and scale, the augmentation recipe); otherwise they are compared within
  // the bounds.
  bool same_bits = false;
};
using Outputs = std::vector<Output>;

// A case's op on one backend with its inputs in place. run() calls the op (for --perf, again
// and again: inputs are never zeros, and ops that update state in place keep updating it);
// outputs() reads the results back after the first run().
struct Prepared {
  std::function<void()> run;
  std::function<Outputs()> outputs;
  int calls_per_run = 1;  // op calls one run() makes (several optimizer steps, say)
};

struct OpCase {
  std::string name;  // "<op>/<what>", unique; letters, digits, '_' and the one '/'
  OpKind op{};
  std::vector<DType> dtypes{DType::f32, DType::bf16, DType::f16};
  std::vector<Layout> layouts{Layout::nchw};
  Tolerance tol{};
  // A GPU result against the CPU's on the same inputs; unset: the two reference bounds added.
  std::optional<Tolerance> vs_cpu = std::nullopt;
  // Builds the inputs, rounded to `values`, on `backend` in `v`; the op runs in run().
  // `values` is v.dtype except where the CPU reproduces a GPU run in f32.
  std::function<Prepared(Backend& backend, const Variant& v, DType values)> prepare;
  // The float64 reference on the same inputs (rounded to `values`) for a run in `v`.
  std::function<Outputs(const Variant& v, DType values)> reference;
  // What a backend must support to run v; unset: v itself (cast needs its source's too).
  std::function<std::vector<Variant>(const Variant&)> needs = nullptr;
  // Checks beyond the reference on a backend's results; returns what is wrong, or "".
  std::function<std::string(const Outputs&)> invariants = nullptr;

  std::vector<Variant> variants() const;  // dtypes x layouts
  std::vector<Variant> requirements(const Variant& v) const;
  // Whether `ops` runs v (supports() for every requirement).
  bool supported_by(const Ops& ops, const Variant& v) const;
};

// Every case of every family, in one list (op_cases.cpp names each family once).
const std::vector<OpCase>& all_cases();
// The families' tables.
std::vector<OpCase> conv_cases();
std::vector<OpCase> batchnorm_cases();
std::vector<OpCase> activation_cases();
std::vector<OpCase> pool_cases();
std::vector<OpCase> linear_cases();
std::vector<OpCase> elementwise_cases();  // add, add_inplace, concat, split, cast, fill
std::vector<OpCase> dropout_cases();
std::vector<OpCase> channel_scale_cases();  // channel_scale_forward, channel_scale_backward
std::vector<OpCase> softmax_cases();      // softmax_cross_entropy, softmax
std::vector<OpCase> optimizer_cases();    // sgd_update, adamw_update
std::vector<OpCase> normalize_augment_cases();
std::vector<OpCase> resample_cases();     // channel_softmax_*, upsample_* (cases_resample.cpp)

// Empty when `got` is within `bound` of `want` (ref::max_relative_error; 0 means bit for
// bit, NaN equal to NaN); else one line on the worst element.
std::string compare(const Vec& got, const Vec& want, double bound);

// ---- building blocks for the case tables ----------------------------------------------------

int64_t numel(const Shape& shape);
std::string shape_name(const Shape& shape);  // "2x3x8x8"
// n-element shape's values, uniform in [lo, hi) from `seed`, rounded to `values`.
Vec random_values(const Shape& shape, uint64_t seed, DType values, double lo = -1.0, double hi = 1.0);
// Each (n, c) plane a shuffle of distinct multiples of 1/16, exact in bf16 and f16 for planes
// of up to 256 elements: a pooling window has one maximum in every dtype.
Vec distinct_planes(const Shape& shape, uint64_t seed);
// `layout` for a 4-D shape; nchw for any other (layouts only mean something in 4-D).
Layout layout_for(const Shape& shape, Layout layout);
// A tensor on `backend` holding `values` (logical nchw order) in dtype and layout.
Tensor device_tensor(Backend& backend, const Vec& values, const Shape& shape, DType dtype,
                     Layout layout = Layout::nchw);
// An output on `backend` whose every byte is 0xFF (NaN in f32, bf16 and f16; -1 and 255 in
// i32 and u8) until the op writes it, so an element it skips shows.
Tensor poisoned(Backend& backend, const Shape& shape, DType dtype, Layout layout = Layout::nchw);
// A tensor's values as doubles in logical (nchw) order, from any device, dtype and layout.
Vec read(const Tensor& t);

}  // namespace convoy::optest
