// End to end through the `convoy` binary: `convoy info` on a model YAML and on a checkpoint,
// and a missing file.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "engine/bundle/run_checkpoint.h"
#include "engine/graph/model.h"
#include "run_command.h"
#include "temp_dir.h"

namespace {

const std::string kSource = CONVOY_SOURCE_DIR;

convoy::testing::CommandResult info(const std::string& model) {
  return convoy::testing::run_command(std::string(CONVOY_BINARY) + " info --model " + model + " 2>&1");
}

TEST(CliInfo, ResNet18TableAndTotals) {
  const auto r = info(kSource + "/models/resnet18.yaml");
  ASSERT_EQ(r.status, 0) << r.output;
  // torchvision's 11,689,512 parameters; the running mean and variance of its 20 batch norms.
  EXPECT_NE(r.output.find("\nparameters: 11,689,512 trainable, 9,600 in buffers (44.63 MiB in fp32)\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("\nforward: 3.6"), std::string::npos) << r.output;  // 1.81 G multiply-adds + BN, ReLU, ...
  EXPECT_NE(r.output.find("\nactivations: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model resnet18: input (3, 224, 224), 1000 classes"), std::string::npos) << r.output;
  // A row per layer: the stem conv (9,408 parameters, 118.01 M multiply-adds), and an add
  // that names its two inputs.
  const auto has_row = [&](const std::string& pattern) {
    return std::regex_search(r.output, std::regex("\n" + pattern + "\n"));
  };
  EXPECT_TRUE(has_row(R"(conv1 +conv2d +\(64, 112, 112\) +9,408 +236\.03)")) << r.output;
  EXPECT_TRUE(has_row(R"(layer2.0.add +add +layer2.0.bn2, layer2.0.downsample.1 +\(128, 28, 28\) +- +0\.10)"))
      << r.output;
  EXPECT_TRUE(has_row(R"(fc +linear +\(1000,\) +513,000 +1\.02)")) << r.output;
}

TEST(CliInfo, ReadsTheModelOfACheckpoint) {
  convoy::testing::TempDir dir("convoy-info");
  convoy::Model model = convoy::Model::from_file(kSource + "/models/resnet20.yaml", 1);
  convoy::RunCheckpointInfo meta;
  meta.model_yaml = model.yaml();
  for (int i = 0; i < 10; ++i) meta.class_names.push_back("class" + std::to_string(i));
  meta.input_shape = model.input_shape();
  meta.mean = {0.5, 0.5, 0.5};
  meta.std = {0.25, 0.25, 0.25};
  const auto path = dir / "best.safetensors";
  convoy::save_run_checkpoint(path, model, {}, meta);
  const auto r = info(path.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("model resnet20: input (3, 32, 32), 10 classes"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nparameters: 272,474 trainable"), std::string::npos) << r.output;
}

TEST(CliInfo, AMissingModelIsAnInputErrorNamingTheFile) {
  for (const std::string path : {"/nonexistent/model.yaml", "/nonexistent/run/best.safetensors"}) {
    const auto r = info(path);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("convoy: error: "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(path), std::string::npos) << r.output;
  }
}

}  // namespace
