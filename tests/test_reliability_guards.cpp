// The run's guards beyond the loss: gradients that are not finite (nan_policy stop and
// skip_step) and a device that fails mid-run (CONVOY_FAULT_INJECT). Tiny runs on the CPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "engine/bundle/run_checkpoint.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/config/run_config.h"
#include "engine/core/error.h"
#include "engine/train/trainer.h"
#include "reliability_fixtures.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using convoy::testing::CommandResult;
using convoy::testing::TempDir;
using convoy::testing::run_command;
using namespace convoy::testing::tiny_run;

std::string train_error(const convoy::RunConfig& rc, const convoy::TrainOptions& options, std::string* log_out) {
  std::ostringstream log;
  try {
    convoy::train(rc, options, log);
  } catch (const convoy::NumericError& e) {
    *log_out = log.str();
    return e.what();
  }
  *log_out = log.str();
  return "";
}

// The tensors of a checkpoint, name by name, bit for bit.
void expect_same_tensors(const fs::path& a, const fs::path& b) {
  const convoy::RunCheckpoint x = convoy::read_run_checkpoint(a, convoy::CheckpointUse::resume);
  const convoy::RunCheckpoint y = convoy::read_run_checkpoint(b, convoy::CheckpointUse::resume);
  ASSERT_EQ(x.tensors.size(), y.tensors.size());
  for (size_t i = 0; i < x.tensors.size(); ++i) {
    ASSERT_EQ(x.tensors[i].name, y.tensors[i].name);
    if (x.tensors[i].tensor.dtype() != convoy::DType::f32) continue;
    EXPECT_EQ(x.tensors[i].tensor.to_floats(), y.tensors[i].tensor.to_floats()) << x.tensors[i].name;
  }
}

// nan_policy: stop (the default): an infinite gradient with a finite loss stops the run at the
// next read-back, naming the step and the gradients, and no checkpoint holds its weights.
TEST(ReliabilityGuards, NonFiniteGradientStopsTheRunNamingTheStep) {
  const TempDir dir("convoy-grad");
  const convoy::RunConfig rc = convoy::load_run_config(write_tiny_config(dir.path(), 2).string(), {});
  ASSERT_FALSE(rc.nan_skip_step);
  convoy::TrainOptions options;
  options.nonfinite_gradient_steps = {10};  // 8 steps per epoch: epoch 2's third
  std::string log;
  const std::string error = train_error(rc, options, &log);
  // conv1's weight, 4 x 1 x 3 x 3, every element made infinite.
  EXPECT_NE(error.find("epoch 2, step 11 (batch 3 of 8): the gradients hold 36 non-finite values"), std::string::npos)
      << error << "\n" << log;
  EXPECT_NE(error.find("the loss is a finite"), std::string::npos) << error;
  EXPECT_NE(error.find("the last good step's gradient norm: "), std::string::npos) << error;
  EXPECT_NE(error.find("The last good checkpoint is kept"), std::string::npos) << error;
  const fs::path last = dir / "runs/tiny/last.safetensors";
  const convoy::RunCheckpoint ckpt = convoy::read_run_checkpoint(last, convoy::CheckpointUse::resume);
  EXPECT_EQ(ckpt.info.epoch, 1);
  expect_finite(ckpt, last);
}

// nan_policy: skip_step: a step with an infinite gradient changes no weight. The same run with
// that step's loss made NaN instead skips the same update, so the two runs end bit for bit alike;
// a run that skips nothing ends elsewhere.
TEST(ReliabilityGuards, SkipStepSkipsAStepWithNonFiniteGradientsWithoutUpdating) {
  const TempDir dir("convoy-grad");
  convoy::RunConfig rc =
      convoy::load_run_config(write_tiny_config(dir.path(), 2, 256, "nan_policy: skip_step\n").string(), {});
  auto run = [&](const std::string& name, const convoy::TrainOptions& options) {
    rc.name = name;
    std::ostringstream log;
    const convoy::TrainResult result = convoy::train(rc, options, log);
    EXPECT_EQ(result.epochs_done, 2) << log.str();
    return std::make_pair(result, log.str());
  };
  convoy::TrainOptions by_gradient;
  by_gradient.nonfinite_gradient_steps = {3, 12};
  const auto [grad_result, grad_log] = run("gradient", by_gradient);
  EXPECT_EQ(grad_result.skipped_steps, 2) << grad_log;
  EXPECT_NE(grad_log.find("skipped 1 step with a non-finite loss or gradients"), std::string::npos) << grad_log;
  const fs::path grad_last = dir / "runs/gradient/last.safetensors";
  expect_finite(convoy::read_run_checkpoint(grad_last, convoy::CheckpointUse::resume), grad_last);

  convoy::TrainOptions by_loss;
  by_loss.nonfinite_loss_steps = {3, 12};
  const auto [loss_result, loss_log] = run("loss", by_loss);
  EXPECT_EQ(loss_result.skipped_steps, 2) << loss_log;
  expect_same_tensors(grad_last, dir / "runs/loss/last.safetensors");

  const auto [plain_result, plain_log] = run("plain", convoy::TrainOptions{});
  EXPECT_EQ(plain_result.skipped_steps, 0) << plain_log;
  const convoy::RunCheckpoint a = convoy::read_run_checkpoint(grad_last, convoy::CheckpointUse::resume);
  const convoy::RunCheckpoint b =
      convoy::read_run_checkpoint(dir / "runs/plain/last.safetensors", convoy::CheckpointUse::resume);
  bool differ = false;
  for (size_t i = 0; i < a.tensors.size(); ++i)
    if (a.tensors[i].tensor.dtype() == convoy::DType::f32 &&
        a.tensors[i].tensor.to_floats() != b.tensors[i].tensor.to_floats())
      differ = true;
  EXPECT_TRUE(differ) << "the skipped steps changed nothing: the test cannot tell a skip from an update";
}

// Gradients that overflow while the loss stays finite, from real weights and data (no test
// hook): a classifier scaled by 1e33 over inputs normalized by a std of 1e-5. Batch norm keeps
// the logits (and the loss, ~1e35) finite, while conv1's weight gradient, the inputs times
// the classifier's weights summed over the batch, passes float's 3.4e38. Without the gradient
// check the run would go on until the loss or the checkpoint's weights gave out.
TEST(ReliabilityGuards, OverflowingGradientsWithAFiniteLossStopTheRun) {
  const TempDir dir("convoy-grad");
  const fs::path config = write_tiny_config(dir.path(), 1);
  const CommandResult base = convoy_run("train --config " + config.string() + " --set name=base");
  ASSERT_EQ(base.status, 0) << base.output;
  convoy::SafetensorsFile weights = convoy::read_safetensors(dir / "runs/base/best.safetensors");
  bool scaled = false;
  for (convoy::NamedTensor& t : weights.tensors)
    if (t.name == "fc1.weight") {
      float* w = t.tensor.data<float>();
      for (int64_t i = 0; i < t.tensor.numel(); ++i) w[i] *= 1e33f;
      scaled = true;
    }
  ASSERT_TRUE(scaled);
  convoy::write_safetensors(dir / "huge.safetensors", weights.tensors, weights.metadata);
  const std::string args = "train --config " + config.string() + " --init-weights " + (dir / "huge.safetensors").string() +
                           " --set optimizer.lr=1e-30 --set optimizer.momentum=0 --set dataset.normalize.std=[1e-5]";
  const CommandResult r = convoy_run(args);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("convoy: error: epoch 1, step "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("non-finite values (inf or nan; the loss is a finite "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("the training loss is"), std::string::npos) << r.output;
}

// skip_step gives up after 100 skipped steps in a row, here all of them by their gradients.
TEST(ReliabilityGuards, SkipStepGivesUpOnGradientsThatStayNonFinite) {
  const TempDir dir("convoy-grad");
  const convoy::RunConfig rc = convoy::load_run_config(
      write_tiny_config(dir.path(), 20, 256, "nan_policy: skip_step\n").string(), {});
  convoy::TrainOptions options;
  for (int64_t s = 5; s < 200; ++s) options.nonfinite_gradient_steps.push_back(s);
  std::string log;
  const std::string error = train_error(rc, options, &log);
  EXPECT_NE(error.find("step 105 (batch 1 of 8): the gradients hold 36 non-finite values"), std::string::npos)
      << error << "\n" << log;
  EXPECT_NE(error.find("for 100 steps in a row (nan_policy: skip_step)"), std::string::npos) << error;
}

// A device that fails mid-run (CONVOY_FAULT_INJECT, the test hook for a lost GPU or an ECC
// error) ends the run with exit 1 and a message naming the epoch and the device's error; `last`
// and `best` stay the last good epoch's, whole, with no temporary left; --resume goes on.
// tests/cuda/test_cuda_faults.cpp runs the same on a GPU, where the fault is a real trap.
TEST(ReliabilityGuards, DeviceFailingMidRunKeepsTheLastGoodCheckpointsAndResumes) {
  const TempDir dir("convoy-fault");
  const fs::path config = write_tiny_config(dir.path(), 3);
  const fs::path run = dir / "runs/tiny";
  const std::string train = std::string(CONVOY_BINARY) + " train --config " + config.string();
  // 8 steps per epoch: step 20 is the fourth of epoch 3.
  const CommandResult failed = run_command("CONVOY_FAULT_INJECT=device_error@step:20 " + train + " 2>&1");
  EXPECT_EQ(failed.status, 1) << failed.output;
  EXPECT_NE(failed.output.find("convoy: error: epoch 3, after 19 steps: the device failed: cpu: device error injected by "
                               "CONVOY_FAULT_INJECT"),
            std::string::npos)
      << failed.output;
  EXPECT_NE(failed.output.find("The last good checkpoint is kept: " + (run / "last.safetensors").string()),
            std::string::npos)
      << failed.output;
  EXPECT_EQ(failed.output.find("internal error"), std::string::npos) << failed.output;
  EXPECT_TRUE(temporaries(run).empty()) << temporaries(run).front();

  // The same run stopped cleanly after epoch 2 holds the same tensors: nothing of epoch 3 reached them.
  const CommandResult two = convoy_run("train --config " + config.string() + " --set epochs=2 --set name=two");
  ASSERT_EQ(two.status, 0) << two.output;
  const convoy::RunCheckpoint last = convoy::read_run_checkpoint(run / "last.safetensors", convoy::CheckpointUse::resume);
  EXPECT_EQ(last.info.epoch, 2);
  expect_same_tensors(run / "last.safetensors", dir / "runs/two/last.safetensors");
  const convoy::RunCheckpoint best = convoy::read_run_checkpoint(run / "best.safetensors", convoy::CheckpointUse::inference);
  expect_finite(best, run / "best.safetensors");
  EXPECT_EQ(metric_epochs(run / "metrics.csv"), (std::vector<int64_t>{1, 2}));

  const CommandResult resumed = convoy_run("train --resume --config " + config.string());
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("done: 3 epochs"), std::string::npos) << resumed.output;
  EXPECT_EQ(metric_epochs(run / "metrics.csv"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(temporaries(run).empty());
}

TEST(ReliabilityGuards, FaultInjectionVariableIsChecked) {
  const TempDir dir("convoy-fault");
  const fs::path config = write_tiny_config(dir.path(), 1);
  const CommandResult r = run_command("CONVOY_FAULT_INJECT=device_error@epoch:2 " + std::string(CONVOY_BINARY) +
                                      " train --config " + config.string() + " 2>&1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("convoy: error: CONVOY_FAULT_INJECT: expected device_error@step:N"), std::string::npos)
      << r.output;
  // The count of cuDNN's compiled engines per fused plan: one digit, or refused naming the variable.
  for (const char* bad : {"x", "10", "-1", "''"}) {
    const CommandResult c = run_command(std::string("CONVOY_CUDNN_COMPILED=") + bad + " " + CONVOY_BINARY +
                                        " train --config " + config.string() + " 2>&1");
    EXPECT_EQ(c.status, 1) << bad << ": " << c.output;
    EXPECT_NE(c.output.find("CONVOY_CUDNN_COMPILED: expected 0 (off) or a count"), std::string::npos) << c.output;
  }
}

}  // namespace
