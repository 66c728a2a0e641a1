// Precision (engine/core/precision.h): one spelling for configs, flags and reports, one error
// wording, and what each device does with each precision.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

#include "engine/bundle/inference_precision.h"
#include "engine/core/error.h"
#include "engine/core/precision.h"
#include "engine/graph/model.h"
#include "engine/inference/inference_plan.h"
#include "engine/inference/quantize.h"

namespace convoy {
namespace {

TEST(Precision, PrintsAndParsesEveryPrecision) {
  for (Precision p : kAllPrecisions) EXPECT_EQ(precision_from_string(to_string(p)), p);
  EXPECT_FALSE(precision_from_string("fp16").has_value());
  EXPECT_FALSE(precision_from_string("auto").has_value());
  EXPECT_FALSE(precision_from_string("FP32").has_value());
  EXPECT_EQ(precision_list(kAllPrecisions), "fp32, bf16, tf32, int8, fp8");
  EXPECT_EQ(precision_list(kTrainingPrecisions), "fp32, bf16, tf32");
  EXPECT_EQ(precision_list(kPlanPrecisions), "fp32, bf16, int8");
}

TEST(Precision, RefusesWhatIsNotAllowedListingWhatIs) {
  EXPECT_EQ(parse_precision("bf16", kPlanPrecisions, "--precision"), Precision::bf16);
  try {
    parse_precision("tf32", kPlanPrecisions, "--precision");
    FAIL() << "tf32 is not a plan precision";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "--precision: 'tf32' is not one of: fp32, bf16, int8");
  }
}

TEST(Precision, DevicesTrainAndInferAsTheBackendsDo) {
  EXPECT_TRUE(trains_in(Precision::fp32, DeviceKind::cpu));
  EXPECT_FALSE(trains_in(Precision::tf32, DeviceKind::cpu));
  EXPECT_FALSE(trains_in(Precision::bf16, DeviceKind::cpu));
  EXPECT_FALSE(trains_in(Precision::int8, DeviceKind::cpu));
  for (Precision p : kTrainingPrecisions) EXPECT_TRUE(trains_in(p, DeviceKind::cuda)) << to_string(p);
  EXPECT_FALSE(trains_in(Precision::int8, DeviceKind::cuda));

  for (Precision p : kPlanPrecisions) EXPECT_TRUE(infers_in(p, DeviceKind::cpu)) << to_string(p);
  EXPECT_FALSE(infers_in(Precision::tf32, DeviceKind::cpu));
  EXPECT_TRUE(infers_in(Precision::int8, DeviceKind::cuda)) << "the GPU's 8-bit plan";
  EXPECT_TRUE(infers_in(Precision::fp8, DeviceKind::cuda));
  EXPECT_FALSE(infers_in(Precision::fp8, DeviceKind::cpu));
  EXPECT_FALSE(trains_in(Precision::fp8, DeviceKind::cuda));
  EXPECT_TRUE(infers_in(Precision::tf32, DeviceKind::cuda));
  EXPECT_TRUE(infers_through_plan_only(Precision::int8, DeviceKind::cpu));
  EXPECT_TRUE(infers_through_plan_only(Precision::bf16, DeviceKind::cpu));
  EXPECT_FALSE(infers_through_plan_only(Precision::fp32, DeviceKind::cpu));
  EXPECT_FALSE(infers_through_plan_only(Precision::bf16, DeviceKind::cuda));
}

// The inference precision's choice only reads the device's kind: the GPU's rules are checked here too.
struct Checkpoint {
  Precision trained = Precision::fp32;
  bool ranges = false;               // an 8-bit checkpoint (every quantized output has a range)
  std::string quantized_for = "cpu";  // its calibration's device and type
  std::string quantized_type = "int8";
};
InferenceOptions choose(std::optional<Precision> asked, const Checkpoint& file, DeviceKind kind) {
  Model m = Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/lenet5.yaml", 1);
  std::map<std::string, double> ranges;
  if (file.ranges) {
    const std::vector<bool> quantized = InferencePlan::quantized_outputs(m);
    std::vector<float> node_max(quantized.size() + 1, 1.0f);
    for (size_t i = 0; i < quantized.size(); ++i) node_max[i + 1] = quantized[i] ? 1.0f : 0.0f;
    ranges = activation_max_by_name(m, node_max);
  }
  PrecisionRequest request;
  request.asked = asked;
  request.trained = file.trained;
  request.quantized_for = file.ranges ? file.quantized_for : "";
  request.quantized_type = file.ranges ? file.quantized_type : "";
  request.words.subject = "model.safetensors";
  request.words.not_int8 = "not an int8 checkpoint";
  return choose_inference_precision(request, m, ranges, Device{kind, 0}, "model.safetensors");
}
Precision chosen(std::optional<Precision> asked, Precision trained, DeviceKind kind) {
  return choose(asked, Checkpoint{trained}, kind).precision;
}

TEST(InferencePrecision, AutoOnAGpuIsTheTrainingPrecisionAndOnTheCpuFp32) {
  EXPECT_EQ(chosen(std::nullopt, Precision::bf16, DeviceKind::cuda), Precision::bf16);
  EXPECT_EQ(chosen(std::nullopt, Precision::tf32, DeviceKind::cuda), Precision::tf32);
  EXPECT_EQ(chosen(std::nullopt, Precision::fp32, DeviceKind::cuda), Precision::fp32);
  EXPECT_EQ(chosen(std::nullopt, Precision::bf16, DeviceKind::cpu), Precision::fp32);
  EXPECT_EQ(chosen(Precision::fp32, Precision::bf16, DeviceKind::cuda), Precision::fp32) << "asked wins";
  EXPECT_EQ(chosen(Precision::tf32, Precision::fp32, DeviceKind::cuda), Precision::tf32);
}

TEST(InferencePrecision, AnEightBitCheckpointRunsItsTypeWhereItWasCalibratedFor) {
  const Checkpoint gpu_fp8{Precision::bf16, true, "cuda", "fp8"}, gpu_int8{Precision::bf16, true, "cuda", "int8"},
      cpu_int8{Precision::bf16, true, "cpu", "int8"};
  EXPECT_EQ(choose(std::nullopt, gpu_fp8, DeviceKind::cuda).precision, Precision::fp8);
  EXPECT_EQ(choose(std::nullopt, gpu_int8, DeviceKind::cuda).precision, Precision::int8);
  EXPECT_EQ(choose(std::nullopt, cpu_int8, DeviceKind::cuda).precision, Precision::bf16) << "a CPU file: as trained";
  EXPECT_EQ(choose(std::nullopt, gpu_fp8, DeviceKind::cpu).precision, Precision::int8) << "the CPU's 8 bits";
  // Either 8-bit type on a GPU from either file: the ranges, one per graph node and the input.
  const InferenceOptions o = choose(Precision::int8, gpu_fp8, DeviceKind::cuda);
  EXPECT_EQ(o.precision, Precision::int8);
  Model m = Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/lenet5.yaml", 1);
  EXPECT_EQ(o.activation_max.size(), m.graph_nodes().size() + 1);
  EXPECT_EQ(choose(Precision::fp8, cpu_int8, DeviceKind::cuda).precision, Precision::fp8);
}

TEST(InferencePrecision, RefusalsSayWhatRunsWhere) {
  auto refusal = [](std::optional<Precision> asked, DeviceKind kind) {
    try {
      choose(asked, Checkpoint{}, kind);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal(Precision::int8, DeviceKind::cuda).find("not an int8 checkpoint"), std::string::npos);
  EXPECT_NE(refusal(Precision::fp8, DeviceKind::cuda).find("not an int8 checkpoint"), std::string::npos);
  EXPECT_NE(refusal(Precision::fp8, DeviceKind::cpu).find("fp8 inference runs on GPUs only"), std::string::npos);
  EXPECT_NE(refusal(Precision::tf32, DeviceKind::cpu).find("tf32 is a GPU's tensor-core math"), std::string::npos);
}

}  // namespace
}  // namespace convoy
