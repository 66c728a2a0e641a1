#pragma once
// The numeric precision of a training run, an inference or a benchmark case: one vocabulary for
// configs, flags, checkpoints and messages, and what each device does with each precision.
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/tensor.h"

namespace convoy {

// fp32: exact f32. tf32: f32 tensors with TF32 tensor-core math (CUDA). bf16: bf16 tensors with
// f32 master weights in training, bf16 compute in inference. int8: the CPU inference plan's
// quantized convolutions and inner products, from a calibration (`convoy quantize`), on the CPU or
// a GPU. fp8: a GPU's 8-bit plan in FP8 e4m3 (compute capability 8.9+), from the same calibration.
enum class Precision { fp32, tf32, bf16, int8, fp8 };

// Every precision, in the order messages list them.
inline constexpr Precision kAllPrecisions[] = {Precision::fp32, Precision::bf16, Precision::tf32, Precision::int8,
                                               Precision::fp8};
// A training run's (RunConfig::precision).
inline constexpr Precision kTrainingPrecisions[] = {Precision::fp32, Precision::bf16, Precision::tf32};
// The CPU inference plans'.
inline constexpr Precision kPlanPrecisions[] = {Precision::fp32, Precision::bf16, Precision::int8};
// Inference on some device (`convoy infer --precision`, serve's `precision`): the plans' on the
// CPU, fp32, tf32, bf16 and the 8-bit plan's int8 and fp8 on a GPU (infers_in).
inline constexpr Precision kInferencePrecisions[] = {Precision::fp32, Precision::bf16, Precision::tf32,
                                                     Precision::int8, Precision::fp8};

// "fp32", "tf32", "bf16", "int8", "fp8": the spelling of configs, flags, checkpoints and reports.
const char* to_string(Precision p);
// The precision `text` spells, or nullopt.
std::optional<Precision> precision_from_string(std::string_view text);
// The names of `precisions`, for a config's choice (YamlMap::get_choice).
std::vector<std::string> precision_names(std::span<const Precision> precisions);
// "fp32, bf16, tf32": `precisions` for a message.
std::string precision_list(std::span<const Precision> precisions);
// `text` as one of `allowed`; else an InputError "<what>: '<text>' is not one of: <allowed>".
Precision parse_precision(std::string_view text, std::span<const Precision> allowed, const std::string& what);

// Training: CUDA trains in fp32, tf32 and bf16 (where its ops run the model in bf16); the CPU in
// fp32 only, its tf32 and bf16 runs falling back to fp32 with a line saying why. int8 never.
bool trains_in(Precision p, DeviceKind device);
// TF32 math is CUDA's (cuDNN tensor-op math, cuBLAS TF32); the CPU computes f32 exactly.
bool has_tf32_math(DeviceKind device);
// Inference: the CPU runs fp32, and bf16 and int8 through its inference plans (oneDNN); CUDA
// runs fp32, tf32 and bf16 through the model's recorded forwards (GraphedBatches), and int8 and
// fp8 through its 8-bit plan (Backend::compile_8bit), recorded the same way.
bool infers_in(Precision p, DeviceKind device);
// Whether inference at `p` on `device` runs through the CPU inference plan only (not the
// model's forward): the CPU's bf16 and int8.
bool infers_through_plan_only(Precision p, DeviceKind device);
// Whether `p` is an 8-bit precision (int8, fp8): it needs a calibrated checkpoint.
inline bool is_eight_bit(Precision p) { return p == Precision::int8 || p == Precision::fp8; }

}  // namespace convoy
