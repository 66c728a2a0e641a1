#pragma once
// A training run's checkpoint (<run>/last.safetensors and best.safetensors): the model's
// state, for `last` the optimizer's too, and the metadata that rebuilds, resumes and serves
// the run. The one place that knows the metadata's keys and how each value is written.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "datasets/preprocess.h"
#include "engine/core/file_io.h"
#include "engine/core/named_tensor.h"
#include "engine/core/precision.h"
#include "engine/core/tensor.h"
#include "engine/graph/model.h"

namespace convoy {

// The metadata, as values. In the file every value is a string: JSON for the lists, decimal
// text for the numbers, so that PyTorch's safetensors reader sees a plain str -> str map.
struct RunCheckpointInfo {
  std::string model_yaml;   // the model's YAML text: enough to rebuild the network
  std::string config_yaml;  // the resolved run config
  std::vector<std::string> class_names;  // index = class id
  Shape input_shape;                      // (C, H, W)
  std::vector<double> mean, std;          // per-channel normalization, on the [0, 1] scale
  // How images become the model's input; absent in checkpoints from before image datasets,
  // whose input was the stored 28x28 image as it was.
  std::optional<Preprocess> preprocess;
  bool horizontal_flip = false;  // the training augmentation, recorded for the reader
  int64_t crop_padding = 0;
  int64_t epoch = 0;           // epochs complete; with batch_in_epoch, where a resume starts
  int64_t batch_in_epoch = 0;  // batches of the next epoch already done (a mid-epoch stop)
  int64_t step = 0;            // optimizer steps in total
  // Samples per step over all ranks (batch_size x ranks): where a resume on another number of
  // GPUs picks an interrupted epoch up. 0: not recorded (taken as the resuming run's).
  int64_t global_batch = 0;
  uint64_t seed = 0;
  // With batch_in_epoch > 0: the interrupted epoch's training figures so far (the sum of its
  // steps' mean losses, its correct predictions, steps and images, over all ranks), which a
  // resumed run adds to, so that the epoch's metrics row covers all of it. Absent in older
  // checkpoints: the row covers the batches after the resume, and the run says so.
  struct EpochSoFar {
    double loss_sum = 0;
    int64_t correct = 0, steps = 0, images = 0;
  };
  std::optional<EpochSoFar> epoch_so_far;
  std::string optimizer;  // its type (sgd, adamw); its state is among the tensors
  Precision precision = Precision::fp32;  // as configured; int8 for `convoy quantize`'s
  double test_accuracy = 0;  // the last evaluation's, in [0, 1]
  double best_accuracy = 0;  // the best evaluation's so far
  // Written by `convoy quantize`: the calibrated range (largest |value| kept) of the input
  // ("input") and of each layer's output, by layer name. Non-empty makes an 8-bit checkpoint.
  std::map<std::string, double> int8_activation_max;
  // With those ranges: what they were calibrated for and how (`convoy quantize --device
  // --precision --method`). Absent in older files: the CPU's int8 by max.
  struct Quantization {
    std::string device = "cpu";  // cpu | cuda
    std::string type = "int8";   // int8 | fp8 (e4m3, GPUs of compute capability 8.9+)
    std::string method = "max";  // max | percentile
    double percentile = 100;     // the percentile method's, in (0, 100]
    int64_t images = 0;          // calibration images (0: not recorded)
  };
  Quantization quantization;
};

// Writes the model's state, then `optimizer_state` (the optimizer's, or none) and the metadata,
// atomically.
void save_run_checkpoint(const std::filesystem::path& path, Model& model, std::vector<NamedTensor> optimizer_state,
                         const RunCheckpointInfo& info);
// The same into `out`, not committed: for a command that commits several files only once all are
// written (convoy import: the model YAML and its checkpoint).
void save_run_checkpoint(OutputFile& out, Model& model, std::vector<NamedTensor> optimizer_state,
                         const RunCheckpointInfo& info);

// What a reader does with a checkpoint, which decides the metadata it must find.
enum class CheckpointUse {
  resume,     // model_yaml, epoch, batch_in_epoch, step; the accuracies and epoch_so_far when present
  inference,  // model_yaml, class_names, mean, std, precision, preprocess (with horizontal_flip and crop_padding;
              // best.safetensors carries no optimizer)
};

struct RunCheckpoint {
  std::vector<NamedTensor> tensors;  // on the CPU: the model's state, then any optimizer's
  RunCheckpointInfo info;            // the fields `use` reads; the others keep their defaults
};

// Bound of the step and batch counters a checkpoint may carry (epochs: kMaxEpochs).
inline constexpr int64_t kMaxCheckpointSteps = int64_t{1} << 53;

// Reads `path`. Metadata that `use` needs and that is missing, malformed or out of range is an
// InputError naming the file and the key; so is a float tensor holding nan or inf, or a
// batch norm's running_var holding a negative value (naming the tensor).
RunCheckpoint read_run_checkpoint(const std::filesystem::path& path, CheckpointUse use);

// The metadata alone, as read_run_checkpoint reads it from a file's: for a checkpoint put together
// from another source (convoy import, from an ONNX file's metadata_props), checked as a reader
// will check it. Errors name `source` and the key.
RunCheckpointInfo read_run_checkpoint_metadata(const std::map<std::string, std::string>& metadata,
                                               const std::string& source, CheckpointUse use);

// For inference: the metadata agrees with the model built from its model_yaml (mean and std
// one value per input channel or one for all, a class name per output). An InputError naming the file and the key otherwise.
void check_checkpoint_fits_model(const RunCheckpointInfo& info, const Model& model, const std::string& source);

}  // namespace convoy
