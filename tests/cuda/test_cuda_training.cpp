// On the GPU: fmnet trains on real Fashion-MNIST to the stated accuracy, and the
// checkpoint is device-independent (the CPU path agrees with the GPU on top-1 classes).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "run_command.h"
#include "engine/backends/backend.h"

namespace {

namespace fs = std::filesystem;

// Fashion-MNIST: $CONVOY_FASHION_MNIST (the GPU machine carries it), else Debian's path.
std::string data_dir() {
  const char* env = std::getenv("CONVOY_FASHION_MNIST");
  return env ? env : "/usr/share/datasets/fashion-mnist";
}

// convoy ARGS, stderr included.
convoy::testing::CommandResult run(const std::string& args) {
  return convoy::testing::run_command(std::string(CONVOY_BINARY) + " " + args + " 2>&1");
}

std::vector<int> read_predictions(const fs::path& path) {
  std::vector<int> out;
  std::ifstream in(path);
  for (int p; in >> p;) out.push_back(p);
  return out;
}

TEST(CudaTraining, FmnetReaches92_5PercentIn8EpochsAndRunsOnTheCpu) {
  if (auto why = convoy::cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  if (!fs::exists(data_dir() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not found in " << data_dir() << " (set CONVOY_FASHION_MNIST)";
  const fs::path dir = fs::temp_directory_path() / ("convoy_cuda_train_" + std::to_string(getpid()));
  fs::remove_all(dir);
  const auto [status, output] = run("train --config " CONVOY_SOURCE_DIR "/configs/fmnet.yaml --set device=cuda"
                                    " --set dataset.path=" + data_dir() + " --set output.dir=" + dir.string());
  ASSERT_EQ(status, 0) << output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(output, m, std::regex("done: .*; test accuracy ([0-9.]+)%"))) << output;
  EXPECT_GE(std::stod(m[1]), 92.5) << output;
  std::cout << output.substr(output.rfind("done:")) << std::flush;

  const std::string ckpt = (dir / "fmnet/best.safetensors").string();
  const std::string eval = " --model " + ckpt + " --data fashion-mnist:test --data-path " + data_dir();
  const auto [gpu_status, gpu_out] = run("infer --device cuda" + eval + " --predictions " + (dir / "gpu.txt").string());
  ASSERT_EQ(gpu_status, 0) << gpu_out;
  const auto [cpu_status, cpu_out] = run("infer --device cpu" + eval + " --predictions " + (dir / "cpu.txt").string());
  ASSERT_EQ(cpu_status, 0) << cpu_out;
  const auto gpu = read_predictions(dir / "gpu.txt"), cpu = read_predictions(dir / "cpu.txt");
  ASSERT_EQ(gpu.size(), 10000u);
  ASSERT_EQ(cpu.size(), 10000u);
  int same = 0;
  for (size_t i = 0; i < gpu.size(); ++i) same += gpu[i] == cpu[i];
  EXPECT_GE(same, 9950) << "the CPU path agrees with the GPU on " << same << " of 10000 test images";
  std::cout << "GPU and CPU agree on the top-1 class of " << same << " of 10000 test images\n";
  fs::remove_all(dir);
}

}  // namespace
