#pragma once
// One writer of the tests' run configs over synthetic data (reliability, data-parallel and
// multi-GPU tests): no engine header, so any test binary can use it.
#include <cstdint>
#include <sstream>
#include <string>

namespace convoy::testing {

// A run config over synthetic data (gray or colour squares): what the reliability,
// data-parallel and multi-GPU tests train. Empty strings and zeros leave a key out.
struct SyntheticRun {
  std::string name = "tiny";
  std::string model = "tiny_model.yaml";  // the model file, relative to the config's folder or absolute
  std::string shape = "[1, 16, 16]";      // the images' (C, H, W)
  int64_t classes = 4;
  int64_t size = 256;        // training images
  int64_t test_limit = 64;
  int64_t batch_size = 32;
  int64_t epochs = 1;
  std::string optimizer = "{type: sgd, lr: 0.05, momentum: 0.9}";
  int64_t seed = 0;
  std::string device = "cpu";
  int64_t threads = 1;
  std::string output_dir;    // output.dir
  int64_t log_every = 1000;
  bool tensorboard = false;  // output.tensorboard
  std::string extra;         // more top-level keys, one per line
};

inline std::string synthetic_run_yaml(const SyntheticRun& r) {
  std::ostringstream y;
  y << "name: " << r.name << "\n"
    << "model: " << r.model << "\n"
    << "dataset:\n"
    << "  kind: synthetic\n"
    << "  synthetic: {shape: " << r.shape << ", classes: " << r.classes << ", size: " << r.size << "}\n"
    << "  normalize: {mean: [0.5], std: [0.25]}\n";
  if (r.test_limit) y << "  test_limit: " << r.test_limit << "\n";
  y << "batch_size: " << r.batch_size << "\n"
    << "epochs: " << r.epochs << "\n"
    << "optimizer: " << r.optimizer << "\n";
  if (r.seed) y << "seed: " << r.seed << "\n";
  y << "device: " << r.device << "\n";
  if (r.threads) y << "threads: " << r.threads << "\n";
  y << "output: {dir: " << r.output_dir << ", log_every: " << r.log_every
    << (r.tensorboard ? ", tensorboard: true" : "") << "}\n" << r.extra;
  return y.str();
}

}  // namespace convoy::testing
