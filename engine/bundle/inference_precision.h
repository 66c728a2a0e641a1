#pragma once
// The precision a checkpoint is inferred in on a device (`convoy infer --precision`, serve's
// `precision`). On the CPU, reduced precision only where asked for (or for an int8 checkpoint) and
// through its inference plans; on a GPU, the precision it was trained in (bf16, tf32) unless asked
// otherwise. Each refusal says what to do instead, in the caller's terms.
#include <map>
#include <optional>
#include <string>

#include "engine/core/precision.h"
#include "engine/core/tensor.h"
#include "engine/graph/model.h"
#include "engine/inference/inference_plan.h"

namespace convoy {

// How the refusals name the caller's settings: `convoy infer`'s flags or serve's config keys.
struct PrecisionWords {
  std::string subject;      // what each refusal starts with: the checkpoint, or the served version
  std::string use_cpu;      // how to pick the CPU ("use --device cpu")
  std::string fp32_on_gpu;  // added for an int8 checkpoint off the CPU: how to run its fp32 weights
  std::string not_int8;     // after "<subject>: ", the refusal of int8 for a checkpoint without ranges
  std::string plan_off;     // the setting that turned the inference plan off ("--no-plan"), or ""
};

struct PrecisionRequest {
  // One of kInferencePrecisions; nullopt (auto): on a GPU the checkpoint's 8-bit type where it was
  // calibrated for a GPU, else `trained` where the GPU infers in it, else fp32; on the CPU int8 for an
  // int8 checkpoint, else fp32.
  std::optional<Precision> asked;
  Precision trained = Precision::fp32;  // the checkpoint's training precision
  // An 8-bit checkpoint's calibration target: "cuda" with "int8" or "fp8" makes that the GPU's
  // automatic precision.
  std::string quantized_for, quantized_type;
  // Refuse now, not at the first batch, a model the plans cannot compile or bf16 on a CPU without
  // it (serve: before the version is ready).
  bool check_plans_now = false;
  PrecisionWords words;
};

// The plans' precision (and, for int8, the calibrated ranges by graph node) for `model`, loaded
// from `checkpoint` with `int8_activation_max` (empty unless an int8 checkpoint), on `device`.
// An InputError where it cannot run. Threads and the rest of the options are the caller's.
InferenceOptions choose_inference_precision(const PrecisionRequest& request, Model& model,
                                            const std::map<std::string, double>& int8_activation_max,
                                            Device device, const std::string& checkpoint);

}  // namespace convoy
