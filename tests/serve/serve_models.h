#pragma once
// Checkpoints for the serve tests: a LeNet-5 trained for a moment by `convoy train` (as users
// make them), and a deliberately slow network (initialized, not trained) that keeps an
// instance busy long enough to fill a queue.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/bundle/run_checkpoint.h"
#include "engine/graph/model.h"
#include "tests/run_command.h"

namespace convoy::testing {

inline const std::string kServeData = "/usr/share/datasets/fashion-mnist";

// `convoy train` on 256 Fashion-MNIST images for one epoch (about a second on 2 cores).
inline std::string train_small_checkpoint(const std::filesystem::path& out_dir, int seed) {
  const std::string name = "serve_seed" + std::to_string(seed);
  const CommandResult r = run_command(std::string(CONVOY_BINARY) + " train --config " + CONVOY_SOURCE_DIR +
                                      "/configs/fashion_mnist.yaml --set name=" + name + " --set output.dir=" +
                                      out_dir.string() + " --set dataset.train_limit=256 --set dataset.test_limit=100" +
                                      " --set epochs=1 --set batch_size=64 --set device=cpu --set seed=" +
                                      std::to_string(seed) + " 2>&1");
  if (r.status != 0) return "";
  return (out_dir / name / "best.safetensors").string();
}

// Two 5x5 convolutions of 128 channels on 3x128x128 images (no Winograd for 5x5): ~27 GFLOP per
// image, 50 ms or more per image on a CPU of a few cores, even through the inference plans.
inline const char* kSlowModelYaml = R"(name: slow
input: [3, 128, 128]
classes: 4
layers:
  - {name: conv1, type: conv2d, out_channels: 128, kernel: 5, padding: 2}
  - {name: relu1, type: relu}
  - {name: conv2, type: conv2d, out_channels: 128, kernel: 5, padding: 2}
  - {name: relu2, type: relu}
  - {name: conv3, type: conv2d, out_channels: 128, kernel: 5, padding: 2}
  - {name: relu3, type: relu}
  - {name: pool, type: global_avg_pool}
  - {name: flatten, type: flatten}
  - {name: fc, type: linear, out_features: 4}
)";

// The model of `yaml` initialized, not trained, as a checkpoint with `class_names`.
inline void write_untrained_checkpoint(const std::filesystem::path& path, const std::string& yaml,
                                       std::vector<std::string> class_names) {
  Model model = Model::from_yaml(yaml, path.string(), 7);
  RunCheckpointInfo info;
  info.model_yaml = yaml;
  info.class_names = std::move(class_names);
  info.input_shape = model.input_shape();
  info.mean = {0.5};
  info.std = {0.25};
  std::filesystem::create_directories(path.parent_path());
  save_run_checkpoint(path, model, {}, info);
}

inline void write_slow_checkpoint(const std::filesystem::path& path) {
  write_untrained_checkpoint(path, kSlowModelYaml, {"a", "b", "c", "d"});
}

// REPO/tiny/1: LeNet-5 (models/lenet5.yaml) untrained, on the CPU, max batch 4: answers at once
// and needs no dataset.
inline void write_tiny_repository(const std::filesystem::path& repo) {
  std::ifstream f(std::string(CONVOY_SOURCE_DIR) + "/models/lenet5.yaml");
  const std::string yaml((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  write_untrained_checkpoint(repo / "tiny" / "1" / "model.safetensors", yaml,
                             {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"});
  std::ofstream(repo / "tiny" / "config.yaml") << "max_batch_size: 4\ndevice: cpu\n";
}

}  // namespace convoy::testing
