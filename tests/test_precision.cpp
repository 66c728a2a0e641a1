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

namespace convoy {
namespace {

TEST(Precision, PrintsAndParsesEveryPrecision) {
  for (Precision p : kAllPrecisions) EXPECT_EQ(precision_from_string(to_string(p)), p);
  EXPECT_FALSE(precision_from_string("fp16").has_value());
  EXPECT_FALSE(precision_from_string("auto").has_value());
  EXPECT_FALSE(precision_from_string("FP32").has_value());
  EXPECT_EQ(precision_list(kAllPrecisions), "fp32, bf16, tf32, int8");
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
  EXPECT_FALSE(infers_in(Precision::int8, DeviceKind::cuda));
  EXPECT_TRUE(infers_in(Precision::tf32, DeviceKind::cuda));
  EXPECT_TRUE(infers_through_plan_only(Precision::int8, DeviceKind::cpu));
  EXPECT_TRUE(infers_through_plan_only(Precision::bf16, DeviceKind::cpu));
  EXPECT_FALSE(infers_through_plan_only(Precision::fp32, DeviceKind::cpu));
  EXPECT_FALSE(infers_through_plan_only(Precision::bf16, DeviceKind::cuda));
}

// The inference precision's choice only reads the device's kind: the GPU's rules are checked here too.
Precision chosen(std::optional<Precision> asked, Precision trained, DeviceKind kind,
                 const std::map<std::string, double>& int8_ranges = {}) {
  Model m = Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/lenet5.yaml", 1);
  PrecisionRequest request;
  request.asked = asked;
  request.trained = trained;
  request.words.subject = "model.safetensors";
  return choose_inference_precision(request, m, int8_ranges, Device{kind, 0}, "model.safetensors").precision;
}

TEST(InferencePrecision, AutoOnAGpuIsTheTrainingPrecisionAndOnTheCpuFp32) {
  EXPECT_EQ(chosen(std::nullopt, Precision::bf16, DeviceKind::cuda), Precision::bf16);
  EXPECT_EQ(chosen(std::nullopt, Precision::tf32, DeviceKind::cuda), Precision::tf32);
  EXPECT_EQ(chosen(std::nullopt, Precision::fp32, DeviceKind::cuda), Precision::fp32);
  EXPECT_EQ(chosen(std::nullopt, Precision::bf16, DeviceKind::cpu), Precision::fp32);
  EXPECT_EQ(chosen(Precision::fp32, Precision::bf16, DeviceKind::cuda), Precision::fp32) << "asked wins";
  EXPECT_EQ(chosen(Precision::tf32, Precision::fp32, DeviceKind::cuda), Precision::tf32);
}

TEST(InferencePrecision, Int8IsTheCpusAndTf32TheGpus) {
  auto refusal = [](std::optional<Precision> asked, DeviceKind kind) {
    try {
      chosen(asked, Precision::fp32, kind);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal(Precision::int8, DeviceKind::cuda).find("int8 inference runs on the CPU only"), std::string::npos);
  EXPECT_NE(refusal(Precision::tf32, DeviceKind::cpu).find("tf32 is a GPU's tensor-core math"), std::string::npos);
}

}  // namespace
}  // namespace convoy
