// `convoy train --gpus N` on a machine without NCCL-capable GPUs: the launcher starts the ranks,
// names the one that failed and exits non-zero; --gpus inside a distributed job is refused.
#include <gtest/gtest.h>

#include <regex>

#include "tests/run_command.h"
#include "tests/temp_dir.h"

namespace {

convoy::testing::CommandResult convoy_train(const std::string& env, const std::string& args) {
  return convoy::testing::run_command(env + " " CONVOY_BINARY " train --config " CONVOY_SOURCE_DIR
                                      "/configs/fashion_mnist.yaml " + args + " 2>&1");
}

}  // namespace

TEST(DataParallelCli, RanksOnTheCpuFailAndTheLauncherNamesTheRank) {
  convoy::testing::TempDir dir("convoy-ddp-cli");
  const auto r = convoy_train("", "--gpus 2 --set device=cpu --set output.dir=" + dir.path().string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("convoy: rank [01] \\(pid [0-9]+\\) exited with status 1; "
                                                     "stopping the other ranks")))
      << r.output;
  // Each rank says why: no NCCL in a CPU-only build, or no CUDA device for NCCL in a CUDA build.
  EXPECT_TRUE(r.output.find("needs NCCL") != std::string::npos || r.output.find("needs a CUDA device") != std::string::npos)
      << r.output;
}

TEST(DataParallelCli, GpusInsideADistributedJobIsRefused) {
  const auto r = convoy_train("RANK=0 WORLD_SIZE=2", "--gpus 2");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("leave --gpus out under mpirun or Kubernetes"), std::string::npos) << r.output;
  const auto zero = convoy_train("", "--gpus 0");
  EXPECT_EQ(zero.status, 2) << zero.output;  // a usage error
}

TEST(DataParallelCli, BadRankVariablesNameTheVariable) {
  const auto r = convoy_train("RANK=2 WORLD_SIZE=2", "--max-steps 1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("RANK='2'"), std::string::npos) << r.output;
}
