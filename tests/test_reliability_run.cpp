// A run's reliability through the `convoy` binary and the trainer: a diverging run stops with a
// clear message and keeps its last good checkpoints, nan_policy: skip_step, one writer per run
// directory, and kill -9 at random moments never leaves a run that cannot go on.
// Every run here is a tiny model on synthetic data, on the CPU: no dataset to install.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "engine/bundle/run_checkpoint.h"
#include "engine/config/run_config.h"
#include "engine/core/error.h"
#include "engine/train/trainer.h"
#include "reliability_fixtures.h"
#include "run_command.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using convoy::testing::CommandResult;
using convoy::testing::TempDir;

using namespace convoy::testing::tiny_run;

// Today's bug (issue 16): lr=1e6 trained to "loss -nan", exited 0 and saved NaN weights as best.
TEST(ReliabilityRun, DivergingRunStopsWithEpochAndStepAndKeepsNoBadCheckpoint) {
  const TempDir dir("convoy-nan");
  const fs::path config = write_tiny_config(dir.path(), 3);
  const CommandResult r = convoy_run("train --config " + config.string() + " --set optimizer.lr=1e6");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("convoy: error: epoch 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("learning rate too high"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("done:"), std::string::npos) << r.output;
  const fs::path run = dir / "runs/tiny";
  for (const char* name : {"last.safetensors", "best.safetensors"})
    EXPECT_FALSE(fs::exists(run / name)) << name << ": no epoch finished with finite weights\n" << r.output;
}

// Two good epochs at lr 0.05, then the step schedule multiplies it by 1e8: the run stops in
// epoch 3, and `last` and `best` stay the finite checkpoints of epoch 2.
TEST(ReliabilityRun, DivergingRunKeepsTheLastGoodCheckpoints) {
  const TempDir dir("convoy-nan");
  const fs::path config =
      write_tiny_config(dir.path(), 4, 256, "schedule: {type: step, milestones: [2], gamma: 1.0e+8}\n");
  const CommandResult r = convoy_run("train --config " + config.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("convoy: error: epoch 3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("learning rate too high"), std::string::npos) << r.output;
  const fs::path run = dir / "runs/tiny";
  EXPECT_NE(r.output.find("The last good checkpoint is kept: " + (run / "last.safetensors").string()),
            std::string::npos)
      << r.output;
  const convoy::RunCheckpoint last = convoy::read_run_checkpoint(run / "last.safetensors", convoy::CheckpointUse::resume);
  EXPECT_EQ(last.info.epoch, 2);
  expect_finite(last, run / "last.safetensors");
  ASSERT_TRUE(fs::exists(run / "best.safetensors"));
  const convoy::RunCheckpoint best =
      convoy::read_run_checkpoint(run / "best.safetensors", convoy::CheckpointUse::inference);
  expect_finite(best, run / "best.safetensors");
  EXPECT_EQ(metric_epochs(run / "metrics.csv"), (std::vector<int64_t>{1, 2}));
}

// nan_policy: skip_step skips the update of a step whose loss is not finite, counts it in the
// epoch's line, and the run finishes. The steps' losses are made NaN through the trainer's test hook.
TEST(ReliabilityRun, SkipStepSkipsNonFiniteStepsAndFinishes) {
  const TempDir dir("convoy-nan");
  const fs::path config = write_tiny_config(dir.path(), 2, 256, "nan_policy: skip_step\n");
  const convoy::RunConfig rc = convoy::load_run_config(config.string(), {});
  EXPECT_TRUE(rc.nan_skip_step);
  convoy::TrainOptions options;
  options.nonfinite_loss_steps = {2, 3, 9};  // 8 steps per epoch: two in epoch 1, one in epoch 2
  std::ostringstream log;
  const convoy::TrainResult result = convoy::train(rc, options, log);
  EXPECT_EQ(result.epochs_done, 2) << log.str();
  EXPECT_EQ(result.steps, 16) << log.str();
  EXPECT_EQ(result.skipped_steps, 3) << log.str();
  EXPECT_NE(log.str().find("skipped 2 steps with a non-finite loss or gradients (nan_policy: skip_step)"), std::string::npos)
      << log.str();
  EXPECT_NE(log.str().find("skipped 1 step with a non-finite loss"), std::string::npos) << log.str();
  const fs::path last = dir / "runs/tiny/last.safetensors";
  expect_finite(convoy::read_run_checkpoint(last, convoy::CheckpointUse::resume), last);

  // The same steps under nan_policy: stop end the run at the first, naming it.
  convoy::RunConfig stop = rc;
  stop.nan_skip_step = false;
  stop.name = "stop";
  std::ostringstream stop_log;
  try {
    convoy::train(stop, options, stop_log);
    ADD_FAILURE() << "no NumericError\n" << stop_log.str();
  } catch (const convoy::NumericError& e) {
    EXPECT_NE(std::string(e.what()).find("epoch 1, step 3 (batch 3 of 8): the training loss is nan"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "runs/stop/last.safetensors"));
}

// Weights that are not finite never reach a checkpoint file.
TEST(ReliabilityRun, NonFiniteWeightsAreNotSaved) {
  const TempDir dir("convoy-nan");
  convoy::Model model = convoy::Model::from_yaml(kTinyModel, "tiny", 1);
  std::vector<convoy::NamedTensor> state = model.state();
  ASSERT_FALSE(state.empty());
  convoy::Tensor& w = state.front().tensor;
  ASSERT_EQ(w.dtype(), convoy::DType::f32);
  w.data<float>()[1] = NAN;
  convoy::RunCheckpointInfo info;
  info.model_yaml = model.yaml();
  try {
    convoy::save_run_checkpoint(dir / "x.safetensors", model, {}, info);
    ADD_FAILURE() << "saved";
  } catch (const convoy::NumericError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor '" + state.front().name + "'"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "x.safetensors"));
  EXPECT_TRUE(temporaries(dir.path()).empty());
}

// One writer per run directory: a second run into it exits 1 at once, naming the directory and
// the first's pid; the first finishes.
TEST(ReliabilityRun, TwoRunsIntoOneDirectoryCannotBothProceed) {
  const TempDir dir("convoy-lock");
  constexpr int64_t kEpochs = 150;  // ~2 s: the first run is still at work when the second starts
  const fs::path config = write_tiny_config(dir.path(), kEpochs);
  const fs::path run = dir / "runs/tiny";
  const pid_t first = spawn("train --config " + config.string(), dir / "first.log");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!(fs::exists(run / ".lock") && fs::file_size(run / ".lock") > 0) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(fs::exists(run / ".lock")) << read_text(dir / "first.log");

  const auto start = std::chrono::steady_clock::now();
  const CommandResult second = convoy_run("train --config " + config.string());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int first_status = wait_status(first);
  ASSERT_EQ(first_status, 0) << read_text(dir / "first.log");
  EXPECT_EQ(second.status, 1) << second.output;
  EXPECT_NE(second.output.find("convoy: error: " + run.string() + ": another convoy run is writing to this run "
                               "directory (pid " + std::to_string(first) + ")"),
            std::string::npos)
      << second.output;
  EXPECT_EQ(second.output.find("training "), std::string::npos) << "it read the data first\n" << second.output;
  EXPECT_LT(seconds, 10.0);
  // The first run's rows only: one per epoch.
  std::vector<int64_t> expected(kEpochs);
  for (int64_t i = 0; i < kEpochs; ++i) expected[i] = i + 1;
  EXPECT_EQ(metric_epochs(run / "metrics.csv"), expected);
}

// Stale temporaries of a killed writer go at the next start; other files stay.
TEST(ReliabilityRun, StaleTemporariesAreRemovedAtTheNextStart) {
  const TempDir dir("convoy-stale");
  const fs::path config = write_tiny_config(dir.path(), 1);
  const fs::path run = dir / "runs/tiny";
  fs::create_directories(run);
  std::ofstream(run / "last.safetensors.tmp.99999") << "torn";
  std::ofstream(run / "best.safetensors.tmp.12") << "torn";
  std::ofstream(run / "metrics.csv.tmp.12.3") << "torn";  // a second writer's name in one process
  std::ofstream(run / "notes.tmp.txt") << "mine";
  const CommandResult r = convoy_run("train --config " + config.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(fs::exists(run / "last.safetensors.tmp.99999"));
  EXPECT_FALSE(fs::exists(run / "best.safetensors.tmp.12"));
  EXPECT_FALSE(fs::exists(run / "metrics.csv.tmp.12.3"));
  EXPECT_TRUE(fs::exists(run / "notes.tmp.txt"));
  EXPECT_NE(r.output.find("removed " + (run / "last.safetensors.tmp.99999").string()), std::string::npos) << r.output;
}

// A resumed run drops rows of epochs its checkpoint does not hold (a crash after the row).
TEST(ReliabilityRun, ResumeDropsMetricsRowsPastTheCheckpoint) {
  const TempDir dir("convoy-metrics");
  const fs::path config = write_tiny_config(dir.path(), 3);
  const fs::path run = dir / "runs/tiny";
  CommandResult r = convoy_run("train --config " + config.string() + " --set epochs=2");
  ASSERT_EQ(r.status, 0) << r.output;
  {
    std::ofstream csv(run / "metrics.csv", std::ios::app);
    csv << "3,24,0.05,1,0.5,1,0.5,0.1,100,100\n4,3";  // a row the checkpoint does not hold, a torn one
  }
  r = convoy_run("train --resume --config " + config.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(metric_epochs(run / "metrics.csv"), (std::vector<int64_t>{1, 2, 3}));
}

// metrics.csv's rows without their timings (epoch_seconds and the images/s): what an exact
// resume reproduces.
std::vector<std::string> rows_without_timings(const fs::path& path) {
  std::vector<std::string> rows;
  std::istringstream lines(read_text(path));
  for (std::string line; std::getline(lines, line);) {
    size_t at = 0;
    for (int comma = 0; comma < 7 && at != std::string::npos; ++comma) at = line.find(',', at + 1);
    rows.push_back(line.substr(0, at));
  }
  return rows;
}

// An epoch stopped in its middle (--max-steps) and resumed: its metrics row has the train loss
// and accuracy of the whole epoch, those of an uninterrupted run, not of the batches after the
// resume only (issue 39); the stop's checkpoint carries the epoch's figures so far.
TEST(ReliabilityRun, AResumedEpochsMetricsRowCoversTheWholeEpoch) {
  const TempDir straight("convoy-straight"), resumed("convoy-resumed");
  const fs::path config_a = write_tiny_config(straight.path(), 2), config_b = write_tiny_config(resumed.path(), 2);
  CommandResult r = convoy_run("train --config " + config_a.string());
  ASSERT_EQ(r.status, 0) << r.output;
  r = convoy_run("train --config " + config_b.string() + " --max-steps 11");  // 8 steps an epoch: 3 into the 2nd
  ASSERT_EQ(r.status, 0) << r.output;
  const fs::path last = resumed / "runs/tiny/last.safetensors";
  const convoy::RunCheckpoint stop = convoy::read_run_checkpoint(last, convoy::CheckpointUse::resume);
  EXPECT_EQ(stop.info.batch_in_epoch, 3);
  ASSERT_TRUE(stop.info.epoch_so_far.has_value());
  EXPECT_EQ(stop.info.epoch_so_far->steps, 3);
  EXPECT_EQ(stop.info.epoch_so_far->images, 96);
  r = convoy_run("train --resume --config " + config_b.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const std::vector<std::string> a = rows_without_timings(straight / "runs/tiny/metrics.csv");
  const std::vector<std::string> b = rows_without_timings(resumed / "runs/tiny/metrics.csv");
  ASSERT_EQ(a.size(), 3u);  // the header and two epochs
  EXPECT_EQ(b, a);
}

// kill -9 at random moments of a run that checkpoints every ~0.1 s: after each, the next
// `--resume` goes on (or starts over); at the end every checkpoint loads, every value in it is
// finite, metrics.csv has no epoch twice and no temporary file is left.
TEST(ReliabilityRun, KillNineLoopLeavesARunThatResumes) {
  const TempDir dir("convoy-kill");
  const fs::path config = write_tiny_config(dir.path(), 100000, 512);
  const fs::path run = dir / "runs/tiny";
  const uint32_t seed = static_cast<uint32_t>(std::random_device{}());
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> delay_ms(0, 700);
  const int kKills = 24;
  int killed = 0;
  for (int i = 0; i < kKills; ++i) {
    const fs::path log = dir / ("run" + std::to_string(i) + ".log");
    const pid_t pid = spawn("train --resume --config " + config.string(), log);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    kill(pid, SIGKILL);
    const int status = wait_status(pid);
    const std::string output = read_text(log);
    if (status == 128 + SIGKILL) {
      ++killed;
    } else {
      ADD_FAILURE() << "kill " << i << " (seed " << seed << "): exit " << status << "\n" << output;
    }
    EXPECT_EQ(output.find("error"), std::string::npos) << "kill " << i << " (seed " << seed << ")\n" << output;
  }
  EXPECT_GE(killed, 20);

  // A last clean run: one more epoch from wherever the run stands.
  int64_t epochs_done = 0;
  if (fs::exists(run / "last.safetensors"))
    epochs_done = convoy::read_run_checkpoint(run / "last.safetensors", convoy::CheckpointUse::resume).info.epoch;
  const CommandResult final_run =
      convoy_run("train --resume --config " + config.string() + " --set epochs=" + std::to_string(epochs_done + 1));
  ASSERT_EQ(final_run.status, 0) << "seed " << seed << "\n" << final_run.output;
  EXPECT_NE(final_run.output.find("done:"), std::string::npos) << final_run.output;

  int checkpoints = 0;
  for (const auto& entry : fs::directory_iterator(run)) {
    if (entry.path().extension() != ".safetensors") continue;
    const bool best = entry.path().filename() == "best.safetensors";
    const convoy::RunCheckpoint ckpt = convoy::read_run_checkpoint(
        entry.path(), best ? convoy::CheckpointUse::inference : convoy::CheckpointUse::resume);
    expect_finite(ckpt, entry.path());
    ++checkpoints;
  }
  EXPECT_EQ(checkpoints, 2);
  EXPECT_TRUE(temporaries(run).empty()) << temporaries(run).front();
  const std::vector<int64_t> epochs = metric_epochs(run / "metrics.csv");
  ASSERT_FALSE(epochs.empty());
  for (size_t i = 1; i < epochs.size(); ++i) EXPECT_LT(epochs[i - 1], epochs[i]) << "seed " << seed;
  EXPECT_EQ(epochs.back(), epochs_done + 1);
  std::cout << "[ kill -9 loop ] seed " << seed << ": " << killed << " kills, then epoch " << epochs_done + 1
            << " in a clean run\n";
}

}  // namespace
