#include "engine/bundle/inference_precision.h"

#include "engine/core/error.h"
#include "engine/inference/eight_bit_graph.h"
#include "engine/inference/quantize.h"

namespace convoy {

InferenceOptions choose_inference_precision(const PrecisionRequest& request, Model& model,
                                            const std::map<std::string, double>& int8_activation_max,
                                            Device device, const std::string& checkpoint) {
  const PrecisionWords& words = request.words;
  InferenceOptions o;
  const bool int8_file = !int8_activation_max.empty();
  const bool gpu = device.kind == DeviceKind::cuda;
  const bool gpu_file = int8_file && request.quantized_for == "cuda";
  const Precision gpu_automatic = gpu_file ? (request.quantized_type == "fp8" ? Precision::fp8 : Precision::int8)
                                  : infers_in(request.trained, device.kind) ? request.trained
                                                                            : Precision::fp32;
  const Precision automatic = gpu ? gpu_automatic : (int8_file ? Precision::int8 : Precision::fp32);
  o.precision = request.asked.value_or(automatic);
  if (o.precision == Precision::fp32) return o;
  const std::string what = std::string(to_string(o.precision)) + " inference";
  if (gpu && is_eight_bit(o.precision)) {
    // The GPU's 8-bit plan (eight_bit_graph.h) from the checkpoint's ranges.
    if (!int8_file) throw InputError(words.subject + ": " + words.not_int8);
    if (request.check_plans_now)
      if (const std::string why = eight_bit_unsupported_reason(model); !why.empty())
        throw InputError(words.subject + ": " + what + " on a GPU: " + why);
    o.activation_max = activation_max_by_node(model, int8_activation_max, checkpoint);
    return o;
  }
  if (o.precision == Precision::fp8)
    throw InputError(words.subject + ": fp8 inference runs on GPUs only (FP8 tensor cores); " +
                     "the CPU runs int8 (--precision int8)");
  // A GPU runs the model's own forward in its dtype (GraphedBatches): tf32 and bf16.
  if (gpu && infers_in(o.precision, device.kind)) return o;
  if (o.precision == Precision::tf32)
    throw InputError(words.subject + ": tf32 is a GPU's tensor-core math; the CPU computes f32 exactly (use fp32)");
  // The model is loaded in f32: reduced precision is the CPU plans' alone.
  if (!infers_through_plan_only(o.precision, device.kind))
    throw InputError(words.subject + ": " + what + " runs on the CPU only (oneDNN); " + words.use_cpu +
                     (int8_file ? words.fp32_on_gpu : ""));
  if (!words.plan_off.empty()) throw InputError(words.plan_off + ": " + what + " runs through the inference plan only");
  if (request.check_plans_now)
    if (const std::string why = InferencePlan::unsupported_reason(model); !why.empty())
      throw InputError(words.subject + ": " + what + " runs through inference plans, and " + why);
  if (o.precision == Precision::bf16) {
    if (request.check_plans_now)
      if (const std::string why = bf16_unsupported_reason(); !why.empty())
        throw InputError(words.subject + ": " + what + ": " + why);
  } else {
    if (!int8_file) throw InputError(words.subject + ": " + words.not_int8);
    o.activation_max = activation_max_by_node(model, int8_activation_max, checkpoint);
  }
  return o;
}

}  // namespace convoy
