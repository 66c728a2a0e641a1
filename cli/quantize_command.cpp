// convoy quantize --model best.safetensors --calibration fashion-mnist:train --samples 512 -o model-int8.safetensors
// Post-training static int8 quantization, as ONNX Runtime's quantize_static or PyTorch's
// prepare/calibrate/convert: calibrate once on a few hundred images, write a new checkpoint,
// and `convoy infer --model model-int8.safetensors` then runs int8 with no calibration data.
#include <filesystem>
#include <iomanip>
#include <iostream>

#include "cli/commands.h"
#include "datasets/dataset.h"
#include "datasets/loader.h"
#include "engine/bundle/loaded_model.h"
#include "engine/bundle/predict.h"
#include "engine/bundle/run_checkpoint.h"
#include "engine/core/error.h"
#include "engine/core/file_io.h"
#include "engine/inference/quantize.h"

namespace convoy::cli {

namespace {

struct QuantizeArgs {
  std::string model;
  std::string calibration;  // KIND:SPLIT
  std::string data_path;
  std::string out;
  int64_t samples = 512;
  int64_t batch_size = 64;
  int threads = 0;
};

int run_quantize(const QuantizeArgs& args, const EngineOptions& engine) {
  const size_t colon = args.calibration.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == args.calibration.size())
    throw InputError("--calibration " + args.calibration + ": expected KIND:SPLIT, e.g. fashion-mnist:train");
  if (std::filesystem::absolute(args.out) == std::filesystem::absolute(args.model))
    throw InputError("-o " + args.out + ": would overwrite the fp32 checkpoint it reads; name a new file");
  check_output_target(args.out, "the int8 checkpoint");  // before the calibration, not after
  BackendOptions options;
  options.threads = args.threads;
  std::unique_ptr<Backend> backend = select_backend("cpu", options, std::cerr);
  LoadedModel loaded = load_model(args.model, *backend, engine.fusion);
  if (!loaded.int8_activation_max.empty())
    throw InputError(args.model + ": already an int8 checkpoint; quantize the fp32 one it came from");

  DatasetSpec spec;
  spec.kind = args.calibration.substr(0, colon);
  spec.path = args.data_path;
  spec.data_volume = engine.data_volume;
  const std::unique_ptr<Dataset> data = load_dataset(spec, args.calibration.substr(colon + 1), args.samples);
  if (data->size() == 0) throw InputError("--calibration " + args.calibration + ": no images");
  DataLoader loader(*data, eval_loader_options(loaded.preprocess, args.batch_size, 2));
  loader.start_epoch(0);
  std::vector<Tensor> batches;  // (N, C, H, W) f32, normalized as the model was trained
  Batch batch;
  int64_t images = 0;
  while (loader.next(batch)) {
    Tensor x = backend->empty(batch.images.shape(), DType::f32);
    backend->ops().normalize_augment(batch.images, loaded.normalize, 0, x);
    images += x.dim(0);
    batches.push_back(std::move(x));
  }
  const std::vector<float> node_max = calibrate_activation_max(loaded.model, batches, args.threads);

  RunCheckpoint source = read_run_checkpoint(args.model, CheckpointUse::inference);
  RunCheckpointInfo info = std::move(source.info);
  info.input_shape = loaded.model.input_shape();
  info.precision = Precision::int8;
  info.int8_activation_max = activation_max_by_name(loaded.model, node_max);
  save_run_checkpoint(args.out, loaded.model, {}, info);
  std::cout << "calibrated " << info.int8_activation_max.size() << " tensor ranges on " << images << " images of "
            << data->name() << "; wrote " << args.out << " (run it: convoy infer --model " << args.out << ")\n";
  return 0;
}

}  // namespace

void add_quantize_command(CLI::App& app, Action& chosen) {
  auto args = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand("quantize", "Post-training int8 quantization for CPU inference (calibrates once)");
  cmd->add_option("--model,-m", args->model, "an fp32 checkpoint written by convoy train (.safetensors)")->required();
  cmd->add_option("--calibration", args->calibration, "calibration images as KIND:SPLIT, e.g. fashion-mnist:train")
      ->required();
  cmd->add_option("--data-path", args->data_path, "directory of the dataset files (default: the Debian package's)");
  cmd->add_option("--samples", args->samples, "calibration images (the split's first N)")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--batch-size", args->batch_size, "images per calibration pass")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--threads", args->threads, "CPU threads (0 = all cores)")->capture_default_str()->check(CLI::Range(0, 1024));
  cmd->add_option("--out,-o", args->out, "the int8 checkpoint to write")->required();
  cmd->callback([args, &chosen] {
    chosen = [args](const EngineOptions& engine) { return run_quantize(*args, engine); };
  });
}

}  // namespace convoy::cli
