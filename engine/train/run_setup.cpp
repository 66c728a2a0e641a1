#include "engine/train/run_setup.h"

#include <algorithm>
#include <filesystem>
#include <ostream>
#include <thread>
#include <vector>

#include "datasets/nvjpeg.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/core/error.h"
#include "engine/config/dataset_kinds.h"
#include "engine/core/usable_cpus.h"
#include "engine/graph/load_weights.h"

namespace convoy {

namespace {

std::string op_list(const std::vector<OpKind>& ops) {
  std::string list;
  for (OpKind op : ops) list += (list.empty() ? "" : ", ") + std::string(op_name(op));
  return list;
}

// The config's precision where the backend runs every op of the model in it; bf16 falls back
// to fp32 with one line saying why (the CPU path computes in fp32 only). tf32 is f32 tensors
// on a backend opened with TF32 math (open_backend).
DType training_dtype(const RunConfig& config, const Model& model, Backend& backend, std::ostream& log) {
  if (config.precision == Precision::tf32 && !trains_in(Precision::tf32, backend.device().kind))
    log << "precision tf32: " << backend.device().str() << " has no TF32 math; training in fp32" << std::endl;
  const DType wanted = config.precision == Precision::bf16 ? DType::bf16 : DType::f32;
  const Layout layout = choose_layout(config.layout, backend, wanted);
  if (wanted == DType::bf16) {
    const std::vector<OpKind> missing = model.unsupported_ops(backend.ops(), wanted, layout);
    if (missing.empty()) return wanted;
    log << "precision bf16: " << backend.device().str() << " does not run " << op_list(missing)
        << " in bf16; training in fp32" << std::endl;
  }
  const Layout f32_layout = choose_layout(config.layout, backend, DType::f32);
  const std::vector<OpKind> missing = model.unsupported_ops(backend.ops(), DType::f32, f32_layout);
  if (!missing.empty())
    throw DeviceError(backend.device().str() + " cannot train " + config.model_path + ": it does not run " +
                      op_list(missing) + " in fp32");
  return DType::f32;
}

}  // namespace

std::unique_ptr<Backend> open_backend(const RunConfig& config, const EngineOptions& engine, std::ostream& log) {
  BackendOptions options;
  options.deterministic = config.deterministic;
  options.benchmark = config.cudnn_benchmark;
  options.threads = static_cast<int>(config.threads);
  options.tf32 = config.precision == Precision::tf32;
  options.cuda = engine.cuda;
  return select_backend(config.device, options, log);
}

std::string test_split_of(const RunConfig& config, std::ostream& log) {
  const DatasetConfig& d = config.dataset;
  if (d.test_split_given || dataset_kind_from_name(d.kind) != DatasetKind::image_folder) return d.test_split;
  const std::filesystem::path root(d.path);
  std::error_code ec;
  if (std::filesystem::exists(root / d.test_split, ec) || !std::filesystem::is_directory(root / "val", ec))
    return d.test_split;
  log << "dataset: " << root.string() << " has val/ and no " << d.test_split
      << "/ (torchvision's layout): evaluating on val (dataset.test_split chooses)" << std::endl;
  return "val";
}

std::unique_ptr<Dataset> load_split(const RunConfig& config, const EngineOptions& engine, const std::string& split,
                                    int64_t limit) {
  DatasetSpec spec;
  spec.kind = config.dataset.kind;
  spec.path = config.dataset.path;
  spec.synthetic_shape = Shape(config.dataset.synthetic_shape.begin(), config.dataset.synthetic_shape.end());
  spec.synthetic_classes = config.dataset.synthetic_classes;
  spec.synthetic_size = config.dataset.synthetic_size;
  spec.data_volume = engine.data_volume;
  return load_dataset(spec, split, limit);
}

Preprocess preprocess_of(const RunConfig& config, const Shape& input) {  // input: (C, H, W)
  const DatasetConfig& d = config.dataset;
  Preprocess p;
  p.channels = input[0];
  p.height = input[1];
  p.width = input[2];
  if (p.channels != 1 && p.channels != 3)
    throw InputError(config.model_path + ": image datasets feed 1 (gray) or 3 (RGB) input channels, the model takes " +
                     std::to_string(p.channels));
  p.resize = d.resize;
  p.random_resized_crop = d.random_resized_crop;
  p.scale_min = d.scale_min;
  p.scale_max = d.scale_max;
  p.ratio_min = d.ratio_min;
  p.ratio_max = d.ratio_max;
  return p;
}

Preprocess preprocess_of(const RunConfig& config, const Model& model) { return preprocess_of(config, model.input_shape()); }

// Decoding image files wants every core but one: the training thread that launches the
// device's work must not queue behind the decoders (measured on the H200 host, 16 cores:
// ResNet-50 from JPEGs lost 13% to synthetic data with 16 workers). In-memory data needs few.
int64_t loader_workers(const RunConfig& config, const Dataset& data) {
  if (config.dataset.workers > 0) return config.dataset.workers;
  const auto cores = static_cast<int64_t>(usable_cpus());  // a container's CPU quota counts
  if (data.stored_shape()) return std::min<int64_t>(4, cores);
  return std::max<int64_t>(1, cores - 1);
}

LoaderOptions train_loader_options(const RunConfig& config, const Dataset& data, const Preprocess& preprocess) {
  LoaderOptions o;
  o.batch_size = config.batch_size;
  o.shuffle = true;
  o.drop_last = true;
  o.seed = config.seed;
  o.mode = SampleMode::train;
  o.preprocess = preprocess;
  o.workers = loader_workers(config, data);
  o.skip_bad_samples = config.dataset.skip_bad_images;
  o.epochs = config.epochs;  // the workers begin each next epoch while one ends
  return o;
}

std::shared_ptr<BatchDecoder> training_batch_decoder(const RunConfig& config, const EngineOptions& engine,
                                                     const Dataset& data, const Backend& backend, std::ostream& log) {
  const std::string& choice = config.dataset.decoder;
  if (choice == "cpu" || !dynamic_cast<const FileDataset*>(&data)) return nullptr;  // in-memory data: nothing to decode
  // auto: enough CPU decoders feed the GPU on their own and take none of its time, where
  // nvJPEG's decoding and resizing share the GPU with training (ResNet-50 from JPEGs: 99.9% of its
  // synthetic-data speed with 15 CPU workers, 92% with nvJPEG; benchmarks/RESULTS.md).
  const int64_t workers = loader_workers(config, data);
  if (choice == "auto" && workers >= kCpuDecodersEnough) {
    if (backend.device().is_cuda())
      log << "decoding training images on the CPU (" << workers << " workers; dataset.decoder: nvjpeg decodes on the GPU)"
          << std::endl;
    return nullptr;
  }
  const std::string why_not = !backend.device().is_cuda() ? "the run is on " + backend.device().str()
                                                          : nvjpeg_unavailable_reason();
  if (why_not.empty()) {
    try {
      std::shared_ptr<BatchDecoder> decoder = make_nvjpeg_batch_decoder(backend.device().index, engine.nvjpeg_hardware);
      log << "decoding training images with " << decoder->describe() << std::endl;
      return decoder;
    } catch (const DeviceError& e) {
      if (choice == "nvjpeg") throw;
      log << "decoding training images on the CPU: nvJPEG did not start (" << e.what() << ")" << std::endl;
      return nullptr;
    }
  }
  if (choice == "nvjpeg") throw InputError(config.source + ": dataset.decoder: nvjpeg cannot be used: " + why_not);
  if (backend.device().is_cuda()) log << "decoding training images on the CPU: " << why_not << std::endl;
  return nullptr;
}

Model load_config_model(const RunConfig& config) {
  if (config.num_classes == 0) return Model::from_file(config.model_path, config.seed);
  const std::string yaml = Model::with_classes(Model::read_file(config.model_path), config.model_path, config.num_classes);
  return Model::from_yaml(yaml, config.model_path, config.seed);
}

Model build_model(const RunConfig& config, const EngineOptions& engine, const Dataset& train_data, Backend& backend,
                  std::ostream& log) {
  Model model = load_config_model(config);
  model.set_fusion(engine.fusion);
  if (static_cast<size_t>(model.num_classes()) != train_data.class_names().size())
    throw InputError(config.model_path + ": model has " + std::to_string(model.num_classes()) +
                     " outputs but the dataset has " + std::to_string(train_data.class_names().size()) + " classes");
  if (config.dataset.mean.size() != 1 && config.dataset.mean.size() != static_cast<size_t>(model.input_shape()[0]))
    throw InputError(config.source + ": dataset.normalize has " + std::to_string(config.dataset.mean.size()) +
                     " channels, the model input has " + std::to_string(model.input_shape()[0]) +
                     " (give one value per channel, or one for all)");
  const DType dtype = training_dtype(config, model, backend, log);
  model.to(backend, dtype, choose_layout(config.layout, backend, dtype));
  return model;
}

void load_init_weights(const RunConfig& config, Model& model, Backend& backend, const std::string& path, bool strict,
                       std::ostream& log) {
  const SafetensorsFile file = read_safetensors(path, ForeignDtypes::skip);
  const std::string classifier = config.num_classes ? model.output_layer() : "";
  const WeightsLoadReport report = load_matching_weights(model, file.tensors, file.skipped, classifier, strict, path);
  log << report.str(path) << std::flush;
  model.refresh_compute_weights(backend);
}

}  // namespace convoy
