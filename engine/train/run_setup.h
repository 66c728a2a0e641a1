#pragma once
// A run's parts from its config: the backend, the datasets, the model and how the loader turns
// images into its input. Shared by the training loop and `convoy train --data-only`.
#include <iosfwd>
#include <memory>
#include <string>

#include "datasets/dataset.h"
#include "datasets/loader.h"
#include "engine/backends/backend.h"
#include "engine/config/run_config.h"
#include "engine/core/engine_options.h"
#include "engine/graph/model.h"

namespace convoy {

// The config's device, with `engine`'s CUDA switches.
std::unique_ptr<Backend> open_backend(const RunConfig& config, const EngineOptions& engine, std::ostream& log);
// The config's dataset, split `split`, its first `limit` samples (0 = all); `engine` says where a
// container mounts the datasets.
// dataset.test_split; or, where none is given and an image folder is in torchvision's layout
// (ROOT/train and ROOT/val, no ROOT/test), "val", said on `log`.
std::string test_split_of(const RunConfig& config, std::ostream& log);

std::unique_ptr<Dataset> load_split(const RunConfig& config, const EngineOptions& engine, const std::string& split,
                                    int64_t limit);
// The model's input (C, H, W), and the crops of the config that reach it.
Preprocess preprocess_of(const RunConfig& config, const Shape& input);
Preprocess preprocess_of(const RunConfig& config, const Model& model);
// The config's loader threads, or its default for `data`.
int64_t loader_workers(const RunConfig& config, const Dataset& data);
LoaderOptions train_loader_options(const RunConfig& config, const Dataset& data, const Preprocess& preprocess);
// The training loader's batch decoder for dataset.decoder (null: the CPU workers decode), with
// a line on `log` saying which. "nvjpeg" without nvJPEG or a CUDA device is an error; "auto"
// then takes the CPU, and also where the loader has kCpuDecodersEnough workers or more. nvJPEG
// takes the backend `engine` says.
constexpr int64_t kCpuDecodersEnough = 12;
std::shared_ptr<BatchDecoder> training_batch_decoder(const RunConfig& config, const EngineOptions& engine,
                                                     const Dataset& data, const Backend& backend, std::ostream& log);
// The config's model file, with its classifier resized when the config says num_classes.
Model load_config_model(const RunConfig& config);
// The config's model, checked against the data, on the backend in the training dtype, fused as
// `engine` says (Model::set_fusion).
Model build_model(const RunConfig& config, const EngineOptions& engine, const Dataset& train_data, Backend& backend,
                  std::ostream& log);
// `convoy train --init-weights`: the tensors of `path` (a torchvision state dict or a Convoy
// checkpoint, safetensors) that match the model's by name and shape, loaded into it, with a
// report on `log` of what was missing, unexpected or mis-shaped; any of those is an error when
// `strict`, except the classifier when the config resizes it (num_classes).
void load_init_weights(const RunConfig& config, Model& model, Backend& backend, const std::string& path, bool strict,
                       std::ostream& log);

}  // namespace convoy
