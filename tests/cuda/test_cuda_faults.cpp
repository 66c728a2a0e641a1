// On the GPU: the run's guards as tests/test_reliability_guards.cpp checks them on the CPU. A
// non-finite gradient stops the run naming the same step and count as the CPU path does, and a
// device fault (CONVOY_FAULT_INJECT: a kernel that traps, a real sticky CUDA error, which also
// shows as an Xid in the kernel log) ends the run with exit 1, the last good checkpoints whole
// and loadable, no temporary files, and --resume going on (in a new process, on a fresh context).
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <string>

#include "engine/backends/backend.h"
#include "engine/bundle/run_checkpoint.h"
#include "engine/config/run_config.h"
#include "engine/core/error.h"
#include "engine/train/trainer.h"
#include "reliability_fixtures.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using convoy::testing::CommandResult;
using convoy::testing::TempDir;
using namespace convoy::testing::tiny_run;

TEST(CudaFaults, NonFiniteGradientStopsTheRunAsOnTheCpu) {
  if (auto why = convoy::cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const TempDir dir("convoy-cuda-grad");
  std::string messages[2];
  for (int gpu = 0; gpu < 2; ++gpu) {
    convoy::RunConfig rc = convoy::load_run_config(write_tiny_config(dir.path(), 2).string(), {});
    rc.device = gpu ? "cuda" : "cpu";
    rc.name = gpu ? "gpu" : "cpu";
    convoy::TrainOptions options;
    options.nonfinite_gradient_steps = {10};
    std::ostringstream log;
    try {
      convoy::train(rc, options, log);
      ADD_FAILURE() << rc.device << ": no NumericError\n" << log.str();
    } catch (const convoy::NumericError& e) {
      messages[gpu] = e.what();
    }
    const fs::path last = dir / ("runs/" + rc.name + "/last.safetensors");
    expect_finite(convoy::read_run_checkpoint(last, convoy::CheckpointUse::resume), last);
  }
  EXPECT_NE(messages[1].find("epoch 2, step 11 (batch 3 of 8): the gradients hold 36 non-finite values"),
            std::string::npos)
      << messages[1];
  // The same words up to the loss's value (which the two devices compute in other orders).
  EXPECT_EQ(messages[0].substr(0, messages[0].find("the loss is")), messages[1].substr(0, messages[1].find("the loss is")));
}

TEST(CudaFaults, DeviceFaultMidRunKeepsTheLastGoodCheckpointsAndResumes) {
  if (auto why = convoy::cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const TempDir dir("convoy-cuda-fault");
  const fs::path config = write_tiny_config(dir.path(), 3);
  const fs::path run = dir / "runs/tiny";
  const std::string train = std::string(CONVOY_BINARY) + " train --config " + config.string() + " --set device=cuda";
  const CommandResult failed =
      convoy::testing::run_command("CONVOY_FAULT_INJECT=device_error@step:20 " + train + " 2>&1");
  EXPECT_EQ(failed.status, 1) << failed.output;
  EXPECT_NE(failed.output.find("convoy: error: epoch 3, after "), std::string::npos) << failed.output;
  // The trap surfaces at the next CUDA, cuDNN or cuBLAS check, whichever comes first.
  EXPECT_TRUE(std::regex_search(failed.output, std::regex(" steps: the device failed: (CUDA|cuDNN|cuBLAS) error ")))
      << failed.output;
  EXPECT_NE(failed.output.find("The last good checkpoint is kept: " + (run / "last.safetensors").string()),
            std::string::npos)
      << failed.output;
  EXPECT_EQ(failed.output.find("internal error"), std::string::npos) << failed.output;
  EXPECT_TRUE(temporaries(run).empty()) << temporaries(run).front();
  const convoy::RunCheckpoint last = convoy::read_run_checkpoint(run / "last.safetensors", convoy::CheckpointUse::resume);
  EXPECT_EQ(last.info.epoch, 2);
  expect_finite(last, run / "last.safetensors");
  expect_finite(convoy::read_run_checkpoint(run / "best.safetensors", convoy::CheckpointUse::inference),
                run / "best.safetensors");
  EXPECT_EQ(metric_epochs(run / "metrics.csv"), (std::vector<int64_t>{1, 2}));

  const CommandResult resumed = convoy::testing::run_command(train + " --resume 2>&1");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("done: 3 epochs"), std::string::npos) << resumed.output;
  EXPECT_EQ(metric_epochs(run / "metrics.csv"), (std::vector<int64_t>{1, 2, 3}));
}

}  // namespace
