// Run-config validation: every kind of bad YAML gets a message naming file, line and key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/config/run_config.h"
#include "engine/core/error.h"

namespace convoy {
namespace {

const std::string kModels = std::string(CONVOY_SOURCE_DIR) + "/models";

RunConfig parse(const std::string& text, std::vector<std::string> overrides = {}) {
  return parse_run_config(text, "run.yaml", kModels, overrides);
}

// The InputError message of parsing `text`, or "" if it parsed.
std::string error_of(const std::string& text, std::vector<std::string> overrides = {}) {
  try {
    parse(text, std::move(overrides));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Config, MinimalConfigGetsDefaults) {
  const RunConfig c = parse("model: lenet5.yaml\n");
  EXPECT_EQ(c.model_path, kModels + "/lenet5.yaml");
  EXPECT_EQ(c.optimizer.type, "sgd");
  EXPECT_EQ(c.device, "auto");
  EXPECT_EQ(c.dataset.kind, "fashion-mnist");
  EXPECT_EQ(c.dataset.path, "");  // the kind's default location
  EXPECT_EQ(c.dataset.workers, 0);
  EXPECT_FALSE(c.dataset.skip_bad_images);
  EXPECT_FALSE(c.dataset.random_resized_crop);
  EXPECT_EQ(c.layout, "auto");
  EXPECT_TRUE(c.cudnn_benchmark);
}

TEST(Config, ShippedDefaultConfigIsValid) {
  const RunConfig c = load_run_config(std::string(CONVOY_SOURCE_DIR) + "/configs/fashion_mnist.yaml", {});
  EXPECT_EQ(c.name, "fashion_mnist");
  EXPECT_TRUE(std::filesystem::exists(c.model_path));
  const RunConfig f = load_run_config(std::string(CONVOY_SOURCE_DIR) + "/configs/fmnet.yaml", {});
  EXPECT_EQ(f.batch_size, 512);
  EXPECT_EQ(f.precision, convoy::Precision::bf16);
}

TEST(Config, FullConfigIsRead) {
  const RunConfig c = parse(R"(
name: exp1
model: fmnet.yaml
dataset:
  kind: mnist
  path: /data/mnist
  train_limit: 100
  normalize: {mean: [0.5], std: [0.25]}
  augment: {crop_padding: 2, horizontal_flip: true}
batch_size: 64
epochs: 3
optimizer: {type: adamw, lr: 0.003, weight_decay: 0.05, beta2: 0.99}
schedule: {type: step, milestones: [1, 2], gamma: 0.5, warmup_epochs: 0.5}
label_smoothing: 0.1
seed: 7
device: cuda:1
precision: bf16
layout: nhwc
cudnn_benchmark: false
output: {dir: /runs, log_every: 10}
)");
  EXPECT_EQ(c.name, "exp1");
  EXPECT_EQ(c.dataset.kind, "mnist");
  EXPECT_EQ(c.dataset.train_limit, 100);
  EXPECT_DOUBLE_EQ(c.dataset.std[0], 0.25);
  EXPECT_EQ(c.dataset.crop_padding, 2);
  EXPECT_TRUE(c.dataset.horizontal_flip);
  EXPECT_EQ(c.optimizer.type, "adamw");
  EXPECT_DOUBLE_EQ(c.optimizer.beta2, 0.99);
  EXPECT_EQ(c.schedule.milestones, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(c.device, "cuda:1");
  EXPECT_EQ(c.layout, "nhwc");
  EXPECT_FALSE(c.cudnn_benchmark);
  EXPECT_EQ(c.output_dir, "/runs");
  EXPECT_EQ(c.log_every, 10);
}

TEST(Config, UnknownKeyNamesFileLineAndKey) {
  const std::string e = error_of("model: lenet5.yaml\nbatch_size: 32\nbatchsize: 64\n");
  EXPECT_NE(e.find("run.yaml:3"), std::string::npos) << e;
  EXPECT_NE(e.find("batchsize: unknown key"), std::string::npos) << e;
  EXPECT_NE(e.find("batch_size"), std::string::npos) << e;  // lists the known keys
}

TEST(Config, UnknownNestedKeyNamesItsPath) {
  const std::string e = error_of("model: lenet5.yaml\noptimizer:\n  type: sgd\n  learning_rate: 0.1\n");
  EXPECT_NE(e.find("run.yaml:4"), std::string::npos) << e;
  EXPECT_NE(e.find("optimizer.learning_rate: unknown key"), std::string::npos) << e;
}

TEST(Config, WrongTypeSaysWhatWasExpected) {
  const std::string e = error_of("model: lenet5.yaml\nepochs: three\n");
  EXPECT_NE(e.find("run.yaml:2"), std::string::npos) << e;
  EXPECT_NE(e.find("epochs: expected an integer, found 'three'"), std::string::npos) << e;
  const std::string b = error_of("model: lenet5.yaml\ndataset: {augment: {horizontal_flip: maybe}}\n");
  EXPECT_NE(b.find("dataset.augment.horizontal_flip: expected true or false"), std::string::npos) << b;
  const std::string m = error_of("model: lenet5.yaml\noptimizer: [sgd]\n");
  EXPECT_NE(m.find("optimizer: expected a mapping"), std::string::npos) << m;
}

TEST(Config, BadChoiceListsTheChoices) {
  const std::string e = error_of("model: lenet5.yaml\noptimizer: {type: rmsprop}\n");
  EXPECT_NE(e.find("optimizer.type: 'rmsprop' is not one of: sgd, adamw"), std::string::npos) << e;
  const std::string p = error_of("model: lenet5.yaml\nprecision: fp8\n");
  EXPECT_NE(p.find("precision: 'fp8' is not one of: fp32, bf16, tf32"), std::string::npos) << p;
  EXPECT_EQ(parse("model: lenet5.yaml\nprecision: tf32\n").precision, convoy::Precision::tf32);
  const std::string l = error_of("model: lenet5.yaml\nlayout: channels_last\n");
  EXPECT_NE(l.find("layout: 'channels_last' is not one of: auto, nchw, nhwc"), std::string::npos) << l;
}

TEST(Config, OutOfRangeValuesAreRejected) {
  EXPECT_NE(error_of("model: lenet5.yaml\nbatch_size: 0\n").find("batch_size: must be greater than 0"), std::string::npos);
  EXPECT_NE(error_of("model: lenet5.yaml\noptimizer: {momentum: 1.5}\n").find("optimizer.momentum"), std::string::npos);
  EXPECT_NE(error_of("model: lenet5.yaml\nlabel_smoothing: 1\n").find("label_smoothing"), std::string::npos);
  EXPECT_NE(error_of("model: lenet5.yaml\ndevice: tpu\n").find("device: 'tpu'"), std::string::npos);
  EXPECT_NE(error_of("model: lenet5.yaml\nschedule: {type: step}\n").find("schedule.milestones"), std::string::npos);
}

TEST(Config, MissingModelFileIsNamed) {
  const std::string e = error_of("model: nope.yaml\n");
  EXPECT_NE(e.find("model: file not found: " + kModels + "/nope.yaml"), std::string::npos) << e;
  EXPECT_NE(error_of("name: x\n").find("model: missing"), std::string::npos);
}

TEST(Config, MalformedYamlGivesLineAndColumn) {
  const std::string e = error_of("model: lenet5.yaml\noptimizer: {type: sgd\nepochs: 2\n");
  EXPECT_NE(e.find("run.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("invalid YAML"), std::string::npos) << e;
}

TEST(Config, SetOverridesAnyKeyWithItsType) {
  const RunConfig c = parse("model: lenet5.yaml\noptimizer: {lr: 0.1}\n",
                            {"optimizer.lr=0.05", "epochs=4", "dataset.augment.horizontal_flip=true",
                             "output.dir=/runs"});
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 0.05);
  EXPECT_EQ(c.epochs, 4);
  EXPECT_TRUE(c.dataset.horizontal_flip);
  EXPECT_EQ(c.output_dir, "/runs");
  EXPECT_NE(c.resolved_yaml.find("0.05"), std::string::npos);
}

TEST(Config, BadOverridesAreErrors) {
  EXPECT_NE(error_of("model: lenet5.yaml\n", {"epochs"}).find("expected key=value"), std::string::npos);
  EXPECT_NE(error_of("model: lenet5.yaml\n", {"optimizer.lrr=1"}).find("optimizer.lrr: unknown key"), std::string::npos);
  EXPECT_NE(error_of("model: lenet5.yaml\n", {"epochs=x"}).find("epochs: expected an integer"), std::string::npos);
}

TEST(Config, MissingConfigFileIsNamed) {
  try {
    load_run_config("/nonexistent/run.yaml", {});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/run.yaml: no such file"), std::string::npos);
  }
}

}  // namespace
}  // namespace convoy
