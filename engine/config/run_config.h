#pragma once
// A training or inference run, as read from configs/*.yaml and validated.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/precision.h"

namespace convoy {

// Bounds of the config's sizes: a value beyond them is a typo, never a run.
inline constexpr int64_t kMaxThreads = 1024;            // threads, and what reaches OpenMP
inline constexpr int64_t kMaxBatchSize = int64_t{1} << 20;
inline constexpr int64_t kMaxEpochs = 1000000;

struct DatasetConfig {
  std::string kind = "fashion-mnist";  // a name in kDatasetKinds (engine/config/dataset_kinds.h)
  std::string path;  // empty: the kind's default location (Fashion-MNIST's Debian package)
  std::string train_split = "train";
  std::string test_split = "test";
  bool test_split_given = false;  // else an image folder with val/ and no test/ evaluates on val
  int64_t train_limit = 0;  // first N samples only; 0 = all
  int64_t test_limit = 0;
  std::vector<int64_t> synthetic_shape = {3, 224, 224};  // synthetic: (C, H, W), classes, size
  int64_t synthetic_classes = 1000;
  int64_t synthetic_size = 0;  // per split; 0 = 50,000 train / 10,000 test
  int64_t workers = 0;         // loader threads; 0 = all cores for image files, 2 for in-memory data
  bool skip_bad_images = false;  // on_bad_image: fail | skip
  // Who decodes the training JPEGs: auto (nvJPEG on a CUDA run where it is compiled in, else
  // the CPU workers) | cpu | nvjpeg.
  std::string decoder = "auto";
  // nvJPEG with N > 0: at most N workers wait on the GPU at once, the others decode on the CPU.
  int64_t nvjpeg_workers = 0;
  std::vector<double> mean = {0.2860};  // per channel (one value: every channel), on the [0, 1] scale
  std::vector<double> std = {0.3530};
  int64_t resize = 0;  // evaluation: shorter side to this, then the centre crop; 0 = straight to the input size
  bool random_resized_crop = false;  // training: torchvision's RandomResizedCrop(scale, ratio)
  double scale_min = 0.08, scale_max = 1.0;
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
  int64_t crop_padding = 0;   // random crop with this much zero padding; 0 = off
  bool horizontal_flip = false;
};

struct OptimizerConfig {
  std::string type = "sgd";  // sgd | adamw
  double lr = 0.1;
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};

struct ScheduleConfig {
  std::string type = "constant";  // constant | step | cosine | onecycle
  double warmup_epochs = 0.0;     // linear warm-up from warmup_start_factor * lr
  double warmup_start_factor = 0.1;
  std::vector<int64_t> milestones;  // step: epochs at which lr *= gamma
  double gamma = 0.1;
  double min_lr = 0.0;             // cosine: the floor
  double pct_start = 0.3;          // onecycle: fraction of steps spent rising
  double div_factor = 25.0;        // onecycle: initial lr = lr / div_factor
  double final_div_factor = 1e4;   // onecycle: final lr = initial lr / final_div_factor
};

struct RunConfig {
  std::string source;       // the config file (for messages)
  std::string name = "run"; // runs/<name>/
  std::string model_path;   // resolved model YAML path
  int64_t num_classes = 0;  // resize the model's classifier to this many classes; 0 = as the model says
  // init_weights: {path, strict}: a new run starts from these weights (`convoy train --init-weights`)
  std::string init_weights;
  bool init_weights_strict = false;
  DatasetConfig dataset;
  int64_t batch_size = 128;
  int64_t epochs = 1;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  double label_smoothing = 0.0;
  // nan_policy: a step whose loss or gradients are not finite stops the run (stop), or its
  // optimizer update is skipped (skip_step: reads each step's loss and gradient check back
  // before the update, one sync per step).
  bool nan_skip_step = false;
  uint64_t seed = 42;
  std::string device = "auto";     // auto | cpu | cuda | cuda:N
  // fp32 (exact) | bf16 (mixed: bf16 activations, f32 master weights) | tf32 (f32 tensors,
  // convolutions and GEMMs on TF32 tensor cores: CUDA only, the CPU computes fp32)
  Precision precision = Precision::fp32;
  std::string layout = "auto";     // activations: auto (the backend's choice) | nchw | nhwc (GPU only)
  bool deterministic = false;
  bool cudnn_benchmark = true;     // time cuDNN's algorithms per shape (PyTorch's cudnn.benchmark)
  int64_t threads = 0;             // CPU threads; 0 = all cores
  std::string output_dir = "runs"; // the run writes to <output_dir>/<name>/
  int64_t log_every = 50;          // steps between plain progress lines (not a terminal)
  bool tensorboard = false;        // output.tensorboard: event files in the run directory
  std::string resolved_yaml;       // the final config with overrides, for checkpoints
  // Data-parallel runs (several ranks): `distributed:` in the file.
  double distributed_timeout_seconds = 300;  // a collective not done by then stops the job
  int64_t bucket_mb = 25;                    // gradient bucket size (DDP's bucket_cap_mb)
  bool sync_batchnorm = false;               // batch statistics over all ranks, not per GPU
};

// Reads and validates a run config; `overrides` are "key.path=value" strings applied
// before validation (values parsed as YAML scalars). Relative paths in the file (model,
// dataset.path) are resolved against the config file's directory.
RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides);
// The same from YAML text (`source` names it in messages; relative paths against `base_dir`).
RunConfig parse_run_config(const std::string& yaml_text, const std::string& source,
                           const std::string& base_dir, const std::vector<std::string>& overrides);

}  // namespace convoy
