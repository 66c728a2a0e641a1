// On the GPU: fmnet trains on real Fashion-MNIST to the stated accuracy, and the
// checkpoint is device-independent: the GPU's inference path, in bf16 as trained and in fp32,
// agrees with the CPU's on the top-1 class of >= 99.5% of the test set.
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
  // The GPU's inference path (recorded forwards, channels-last) in the checkpoint's precision
  // (auto: bf16, as trained) and in exact fp32, and the CPU's fp32 inference plan.
  const auto [gpu_status, gpu_out] = run("infer --device cuda" + eval + " --predictions " + (dir / "gpu.txt").string());
  ASSERT_EQ(gpu_status, 0) << gpu_out;
  EXPECT_NE(gpu_out.find("bf16"), std::string::npos) << "auto on a GPU infers in the training precision\n" << gpu_out;
  const auto [f32_status, f32_out] =
      run("infer --device cuda --precision fp32" + eval + " --predictions " + (dir / "gpu_fp32.txt").string());
  ASSERT_EQ(f32_status, 0) << f32_out;
  const auto [cpu_status, cpu_out] = run("infer --device cpu" + eval + " --predictions " + (dir / "cpu.txt").string());
  ASSERT_EQ(cpu_status, 0) << cpu_out;
  const auto gpu = read_predictions(dir / "gpu.txt"), gpu_fp32 = read_predictions(dir / "gpu_fp32.txt"),
             cpu = read_predictions(dir / "cpu.txt");
  ASSERT_EQ(gpu.size(), 10000u);
  ASSERT_EQ(gpu_fp32.size(), 10000u);
  ASSERT_EQ(cpu.size(), 10000u);
  auto agree = [](const std::vector<int>& a, const std::vector<int>& b) {
    int same = 0;
    for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
    return same;
  };
  const int bf16_cpu = agree(gpu, cpu), fp32_cpu = agree(gpu_fp32, cpu), bf16_fp32 = agree(gpu, gpu_fp32);
  EXPECT_GE(bf16_cpu, 9950) << "the GPU's bf16 path agrees with the CPU's fp32 on " << bf16_cpu << " of 10000";
  EXPECT_GE(bf16_fp32, 9950) << "the GPU's bf16 path agrees with its fp32 on " << bf16_fp32 << " of 10000";
  EXPECT_GE(fp32_cpu, 9990) << "the GPU's fp32 path agrees with the CPU's on " << fp32_cpu << " of 10000";
  // The inference path's accuracy is the training run's own evaluation (its eval-mode forward).
  std::smatch a;
  ASSERT_TRUE(std::regex_search(gpu_out, a, std::regex("accuracy ([0-9.]+)%"))) << gpu_out;
  EXPECT_NEAR(std::stod(a[1]), std::stod(m[1]), 0.3) << gpu_out;
  std::cout << "top-1 agreement on 10000 test images: GPU bf16 vs CPU fp32 " << bf16_cpu << ", GPU bf16 vs GPU fp32 "
            << bf16_fp32 << ", GPU fp32 vs CPU fp32 " << fp32_cpu << "; GPU bf16 accuracy " << a[1] << "% (trained "
            << m[1] << "%)\n";
  fs::remove_all(dir);
}

}  // namespace
