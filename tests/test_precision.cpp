// Precision (engine/core/precision.h): one spelling for configs, flags and reports, one error
// wording, and what each device does with each precision.
#include <gtest/gtest.h>

#include <string>

#include "engine/core/error.h"
#include "engine/core/precision.h"

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

}  // namespace
}  // namespace convoy
