// convoy quantize --model best.safetensors --calibration fashion-mnist:train --samples 512 -o model-int8.safetensors
// Post-training static 8-bit quantization, as ONNX Runtime's quantize_static or PyTorch's
// prepare/calibrate/convert: calibrate once on a few hundred images, write a new checkpoint,
// and `convoy infer --model model-int8.safetensors` then runs int8 with no calibration data.
// --device cuda calibrates for the GPU (int8, or FP8 e4m3 with --precision fp8): the ranges are
// taken on the CPU's fp32 plan either way (the same values on any device), by the method that
// suits the type (calibration_method_for).
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "datasets/dataset.h"
#include "datasets/loader.h"
#include "engine/bundle/loaded_model.h"
#include "engine/bundle/predict.h"
#include "engine/bundle/run_checkpoint.h"
#include "engine/core/error.h"
#include "engine/core/file_io.h"
#include "engine/inference/eight_bit_graph.h"
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
  std::string device = "cpu";    // the device the ranges are for: cpu | cuda
  std::string precision = "int8";  // int8 | fp8
  std::string method;            // max | percentile; empty: calibration_method_for
  double percentile = 99.99;
  bool percentile_given = false;   // --percentile on the command line: the percentile method
};

// The method a type is calibrated by unless one is asked for: the CPU's int8 keeps max (what
// its plans have always been calibrated with, and tested to 97% top-1 agreement); the GPU's
// int8 takes the 99.99th percentile (its 255 even steps are too coarse for a tensor's rare
// outliers); FP8's e4m3 spacing grows with the value, so max costs it little and clips nothing.
CalibrationMethod calibration_method_for(const QuantizeArgs& args) {
  if (args.method == "max" && args.percentile_given)
    throw InputError("--percentile " + std::to_string(args.percentile) + " with --method max: a percentile is the "
                     "percentile method's (drop --method max, or --percentile)");
  if (args.method == "percentile" || args.percentile_given) return CalibrationMethod::percentile;
  if (args.method == "max") return CalibrationMethod::max;
  return args.device == "cuda" && args.precision == "int8" ? CalibrationMethod::percentile : CalibrationMethod::max;
}

int run_quantize(const QuantizeArgs& args, const EngineOptions& engine) {
  const size_t colon = args.calibration.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == args.calibration.size())
    throw InputError("--calibration " + args.calibration + ": expected KIND:SPLIT, e.g. fashion-mnist:train");
  if (std::filesystem::absolute(args.out) == std::filesystem::absolute(args.model))
    throw InputError("-o " + args.out + ": would overwrite the fp32 checkpoint it reads; name a new file");
  if (args.precision == "fp8" && args.device != "cuda")
    throw InputError("--precision fp8: FP8 (e4m3) is a GPU type (tensor cores of compute capability 8.9+); the CPU "
                     "plans have no FP8 kernels: use --device cuda, or int8 for the CPU");
  const Calibration calibration{calibration_method_for(args), args.percentile, args.threads};
  check_output_target(args.out, "the " + args.precision + " checkpoint");  // before the calibration, not after
  BackendOptions options;
  options.threads = args.threads;
  std::unique_ptr<Backend> backend = select_backend("cpu", options, std::cerr);
  LoadedModel loaded = load_model(args.model, *backend, engine.fusion);
  if (!loaded.int8_activation_max.empty())
    throw InputError(args.model + ": already an int8 checkpoint; quantize the fp32 one it came from");
  // Refused before the calibration, not at the first `convoy infer` on a GPU.
  if (args.device == "cuda")
    if (const std::string why = eight_bit_unsupported_reason(loaded.model); !why.empty())
      throw InputError(args.model + ": --device cuda: the GPU's 8-bit plan cannot run this model: " + why +
                       " (for the CPU's int8 plans: --device cpu)");

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
  const std::vector<float> node_max = calibrate_activation_ranges(loaded.model, batches, calibration);

  RunCheckpoint source = read_run_checkpoint(args.model, CheckpointUse::inference);
  RunCheckpointInfo info = std::move(source.info);
  info.input_shape = loaded.model.input_shape();
  info.precision = Precision::int8;
  info.int8_activation_max = activation_max_by_name(loaded.model, node_max);
  const bool percentile = calibration.method == CalibrationMethod::percentile;
  info.quantization = {args.device, args.precision, calibration_method_name(calibration.method),
                       percentile ? args.percentile : 100.0, images};
  save_run_checkpoint(args.out, loaded.model, {}, info);
  std::ostringstream method;
  method << calibration_method_name(calibration.method);
  if (percentile) method << " " << args.percentile;
  std::cout << "calibrated " << info.int8_activation_max.size() << " tensor ranges (" << method.str() << ") on "
            << images << " images of " << data->name() << " for " << args.device << " " << args.precision
            << "; wrote " << args.out;
  if (args.device == "cpu")
    std::cout << " (run it: convoy infer --model " << args.out << ")\n";
  else
    std::cout << " (run it on a GPU: convoy infer --model " << args.out << " --device cuda; it runs "
              << args.precision << " there, int8 on the CPU, and its fp32 weights with --precision fp32)\n";
  return 0;
}

}  // namespace

void add_quantize_command(CLI::App& app, Action& chosen) {
  auto args = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand("quantize", "Post-training 8-bit quantization (calibrates once): int8 on the CPU, int8 or FP8 ranges for the GPU");
  cmd->add_option("--model,-m", args->model, "an fp32 checkpoint written by convoy train (.safetensors)")->required();
  cmd->add_option("--calibration", args->calibration, "calibration images as KIND:SPLIT, e.g. fashion-mnist:train")
      ->required();
  cmd->add_option("--data-path", args->data_path, "directory of the dataset files (default: the Debian package's)");
  cmd->add_option("--samples", args->samples, "calibration images (the split's first N)")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--batch-size", args->batch_size, "images per calibration pass")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--threads", args->threads, "CPU threads (0 = all cores)")->capture_default_str()->check(CLI::Range(0, 1024));
  cmd->add_option("--device", args->device, "the device the ranges are for (calibration runs on the CPU)")
      ->capture_default_str()->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--precision", args->precision, "the 8-bit type: int8, or fp8 (e4m3; --device cuda only)")
      ->capture_default_str()->check(CLI::IsMember({"int8", "fp8"}));
  cmd->add_option("--method", args->method,
                  "how a tensor's range is taken: max, or percentile (default: percentile for cuda int8, else max)")
      ->check(CLI::IsMember({"max", "percentile"}));
  cmd->add_option("--percentile", args->percentile, "the percentile method's, of each tensor's |values| (implies it)")
      ->capture_default_str()->check(CLI::Range(0.001, 100.0));
  cmd->add_option("--out,-o", args->out, "the quantized checkpoint to write")->required();
  cmd->callback([args, cmd, &chosen] {
    args->percentile_given = cmd->count("--percentile") > 0;
    chosen = [args](const EngineOptions& engine) { return run_quantize(*args, engine); };
  });
}

}  // namespace convoy::cli
