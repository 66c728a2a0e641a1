#include "engine/bundle/inference_precision.h"

#include "engine/core/error.h"
#include "engine/inference/quantize.h"

namespace convoy {

InferenceOptions choose_inference_precision(const PrecisionRequest& request, Model& model,
                                            const std::map<std::string, double>& int8_activation_max,
                                            Device device, const std::string& checkpoint) {
  const PrecisionWords& words = request.words;
  CONVOY_CHECK(!request.asked || *request.asked != Precision::tf32, "tf32 is not an inference plan precision");
  InferenceOptions o;
  const bool int8_file = !int8_activation_max.empty();
  o.precision = request.asked.value_or(int8_file ? Precision::int8 : Precision::fp32);
  if (o.precision == Precision::fp32) return o;
  const std::string what = std::string(to_string(o.precision)) + " inference";
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
