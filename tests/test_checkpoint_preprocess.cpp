// A run checkpoint's `preprocess` metadata: how images become the model's input, written by
// training and read back by inference. Round trip, absence, and malformed values.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "engine/bundle/run_checkpoint.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/graph/model.h"
#include "input_error.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using convoy::CheckpointUse;
using convoy::Model;
using convoy::Preprocess;
using convoy::RunCheckpointInfo;

const char* kTinyModel = R"(
name: tiny
input: [3, 40, 48]
layers:
  - {name: conv, type: conv2d, out_channels: 4, kernel: 3}
  - {type: relu}
  - {type: global_avg_pool}
  - {name: fc, type: linear, out_features: 3}
)";

// Every field away from its default.
Preprocess unusual_preprocess() {
  Preprocess p;
  p.channels = 3;
  p.height = 40;
  p.width = 48;
  p.resize = 56;
  p.random_resized_crop = true;
  p.scale_min = 0.2;
  p.scale_max = 0.9;
  p.ratio_min = 0.5;
  p.ratio_max = 2.0;
  return p;
}

RunCheckpointInfo info_of(Model& model) {
  RunCheckpointInfo info;
  info.model_yaml = model.yaml();
  info.config_yaml = "name: x\n";
  info.class_names = {"a", "b", "c"};
  info.input_shape = model.input_shape();
  info.mean = {0.5, 0.4, 0.3};
  info.std = {0.2, 0.25, 0.3};
  info.preprocess = unusual_preprocess();
  info.horizontal_flip = true;
  info.crop_padding = 4;
  info.epoch = 3;
  info.step = 30;
  info.seed = 7;
  info.optimizer = "sgd";
  info.precision = convoy::Precision::fp32;
  return info;
}

class CheckpointPreprocess : public ::testing::Test {
 protected:
  CheckpointPreprocess() : model_(Model::from_yaml(kTinyModel, "tiny.yaml", 3)), info_(info_of(model_)) {}

  // A checkpoint whose metadata 'preprocess' is `value` (the key absent for nullopt).
  fs::path with_preprocess(const std::string& name, const std::optional<std::string>& value) {
    const fs::path good = dir_ / "good.safetensors";
    convoy::save_run_checkpoint(good, model_, {}, info_);
    convoy::SafetensorsFile file = convoy::read_safetensors(good);
    if (value)
      file.metadata["preprocess"] = *value;
    else
      file.metadata.erase("preprocess");
    const fs::path path = dir_ / name;
    convoy::write_safetensors(path, file.tensors, file.metadata);
    return path;
  }

  convoy::testing::TempDir dir_{"convoy-ckpt-pre"};
  Model model_;
  RunCheckpointInfo info_;
};

TEST_F(CheckpointPreprocess, RoundTripsEveryField) {
  const fs::path path = dir_ / "best.safetensors";
  convoy::save_run_checkpoint(path, model_, {}, info_);
  const convoy::RunCheckpoint ckpt = convoy::read_run_checkpoint(path, CheckpointUse::inference);
  ASSERT_TRUE(ckpt.info.preprocess.has_value());
  EXPECT_EQ(*ckpt.info.preprocess, unusual_preprocess());
  // Field by field too: a defaulted operator== that someone narrows must not hide a loss.
  const Preprocess& p = *ckpt.info.preprocess;
  EXPECT_EQ(p.channels, 3);
  EXPECT_EQ(p.height, 40);
  EXPECT_EQ(p.width, 48);
  EXPECT_EQ(p.resize, 56);
  EXPECT_TRUE(p.random_resized_crop);
  EXPECT_DOUBLE_EQ(p.scale_min, 0.2);
  EXPECT_DOUBLE_EQ(p.scale_max, 0.9);
  EXPECT_DOUBLE_EQ(p.ratio_min, 0.5);
  EXPECT_DOUBLE_EQ(p.ratio_max, 2.0);
  EXPECT_TRUE(ckpt.info.horizontal_flip);
  EXPECT_EQ(ckpt.info.crop_padding, 4);
  EXPECT_EQ(ckpt.info.class_names, info_.class_names);
  EXPECT_EQ(ckpt.info.mean, info_.mean);
  EXPECT_EQ(ckpt.info.std, info_.std);
  EXPECT_EQ(ckpt.info.model_yaml, model_.yaml());

  // Without the random crop the value is null and reads back as off.
  info_.preprocess->random_resized_crop = false;
  info_.horizontal_flip = false;
  info_.crop_padding = 0;
  const fs::path plain = dir_ / "plain.safetensors";
  convoy::save_run_checkpoint(plain, model_, {}, info_);
  const auto back = convoy::read_run_checkpoint(plain, CheckpointUse::inference).info;
  ASSERT_TRUE(back.preprocess.has_value());
  EXPECT_FALSE(back.preprocess->random_resized_crop);
  EXPECT_EQ(back.preprocess->resize, 56);
  EXPECT_FALSE(back.horizontal_flip);
  EXPECT_EQ(back.crop_padding, 0);
}

TEST_F(CheckpointPreprocess, WithoutTheKeyIsNullopt) {
  const fs::path path = with_preprocess("old.safetensors", std::nullopt);
  const auto info = convoy::read_run_checkpoint(path, CheckpointUse::inference).info;
  EXPECT_FALSE(info.preprocess.has_value());
  EXPECT_EQ(info.class_names, info_.class_names);  // the rest still reads

  // Saved without a preprocess, the key is not written at all.
  info_.preprocess.reset();
  const fs::path none = dir_ / "none.safetensors";
  convoy::save_run_checkpoint(none, model_, {}, info_);
  EXPECT_EQ(convoy::read_safetensors(none).metadata.count("preprocess"), 0u);
  EXPECT_FALSE(convoy::read_run_checkpoint(none, CheckpointUse::inference).info.preprocess.has_value());
}

TEST_F(CheckpointPreprocess, MalformedValuesAreInputErrorsNamingFileAndKey) {
  const std::string rrc = R"("random_resized_crop": {"scale": [0.2, 0.9], "ratio": [0.5, 2.0]})";
  const std::map<std::string, std::string> cases = {
      {"two_dims", R"({"input": [40, 48], "resize": 56, )" + rrc + "}"},
      {"channels2", R"({"input": [2, 40, 48], "resize": 56, )" + rrc + "}"},
      {"resize_negative", R"({"input": [3, 40, 48], "resize": -1, )" + rrc + "}"},
      {"scale3", R"({"input": [3, 40, 48], "resize": 56, "random_resized_crop": {"scale": [0.2, 0.5, 0.9], )"
                 R"("ratio": [0.5, 2.0]}})"},
      {"not_json", "{input: 3 40 48"},
      {"input_missing", R"({"resize": 56, )" + rrc + "}"},
      {"input_strings", R"({"input": ["3", "40", "48"], "resize": 56, )" + rrc + "}"},
  };
  for (const auto& [name, value] : cases) {
    const fs::path path = with_preprocess(name + ".safetensors", value);
    const std::string message = convoy::testing::input_error_of(
        [&] { convoy::read_run_checkpoint(path, CheckpointUse::inference); }, name);
    EXPECT_MESSAGE(message, path, "'preprocess'");
  }
  // A resume does not need the preprocessing and does not read it.
  const fs::path bad = with_preprocess("resume.safetensors", "not json");
  EXPECT_NO_THROW(convoy::read_run_checkpoint(bad, CheckpointUse::resume));
}

}  // namespace
