#pragma once
// Shared by the reliability tests: hostile inputs (test_reliability_inputs.cpp,
// test_reliability_cli.cpp) and whole runs (test_reliability_run.cpp, test_reliability_guards.cpp).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "engine/bundle/run_checkpoint.h"
#include "run_command.h"
#include "synthetic_run.h"

namespace convoy::testing {

// "message contains fragment", with the message in the failure output.
#define EXPECT_HAS(message, fragment)                                     \
  do {                                                                    \
    const std::string m_ = (message);                                     \
    EXPECT_NE(m_.find(fragment), std::string::npos) << "in: " << m_;      \
  } while (0)

// A small model: conv, batch norm, linear. Its YAML is what the checkpoints below carry.
inline const std::string kSmallModel =
    "name: small\n"
    "input: [1, 8, 8]\n"
    "layers:\n"
    "  - {name: conv, type: conv2d, out_channels: 2, kernel: 3}\n"
    "  - {name: bn, type: batchnorm2d}\n"
    "  - {type: flatten}\n"
    "  - {name: fc, type: linear, out_features: 2}\n";

namespace fs = std::filesystem;

// Whole runs of a tiny model on synthetic data, on the CPU, through the `convoy` binary
// (CONVOY_BINARY) or train(): no dataset to install.
namespace tiny_run {

// 16x16 gray inputs, 4 classes: a few thousand parameters.
inline constexpr const char* kTinyModel = R"(name: tiny
input: [1, 16, 16]
classes: 4
layers:
  - {name: conv1, type: conv2d, out_channels: 4, kernel: 3}
  - {name: bn1, type: batchnorm2d}
  - {name: relu1, type: relu}
  - {name: pool1, type: maxpool2d, kernel: 2}
  - {name: flatten, type: flatten}
  - {name: fc1, type: linear, out_features: 4}
)";

// The tiny run in `dir` (kTinyModel beside it), writing to dir/runs/tiny.
inline fs::path write_tiny_config(const fs::path& dir, int64_t epochs, int64_t train_size = 256,
                                  const std::string& extra = "") {
  std::ofstream(dir / "tiny_model.yaml") << kTinyModel;
  SyntheticRun run;
  run.epochs = epochs;
  run.size = train_size;
  run.output_dir = (dir / "runs").string();
  run.extra = extra;
  const fs::path config = dir / "tiny.yaml";
  std::ofstream(config) << synthetic_run_yaml(run);
  return config;
}

inline convoy::testing::CommandResult convoy_run(const std::string& args) {
  return convoy::testing::run_command(std::string(CONVOY_BINARY) + " " + args + " 2>&1");
}

// Starts convoy ARGS in the background (stdout and stderr to `log`); its pid is convoy's own.
inline pid_t spawn(const std::string& args, const fs::path& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string cmd = "exec " + std::string(CONVOY_BINARY) + " " + args + " >" + log.string() + " 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// The exit status; 128 + N for a signal N.
inline int wait_status(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Every float tensor of the checkpoint is finite.
inline void expect_finite(const convoy::RunCheckpoint& ckpt, const fs::path& path) {
  for (const convoy::NamedTensor& t : ckpt.tensors) {
    if (t.tensor.dtype() != convoy::DType::f32) continue;
    for (float v : t.tensor.to_floats()) {
      ASSERT_TRUE(std::isfinite(v)) << path << ": " << t.name;
    }
  }
}

// The first column of metrics.csv's rows.
inline std::vector<int64_t> metric_epochs(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // the header
  std::vector<int64_t> epochs;
  while (std::getline(in, line)) epochs.push_back(std::stoll(line.substr(0, line.find(','))));
  return epochs;
}

inline std::vector<fs::path> temporaries(const fs::path& dir) {
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().find(".tmp.") != std::string::npos) found.push_back(entry.path());
  return found;
}

}  // namespace tiny_run

}  // namespace convoy::testing
