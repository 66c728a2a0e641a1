// convoy export --model CKPT|MODEL.yaml --format onnx -o model.onnx
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "engine/bundle/run_checkpoint.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/core/error.h"
#include "engine/core/file_io.h"
#include "engine/graph/model.h"
#ifdef CONVOY_HAVE_ONNX
#include "engine/interchange/onnx_export.h"
#endif

namespace convoy::cli {

namespace {

struct ExportArgs {
  std::string model;
  std::string format = "onnx";
  std::string output;
  uint64_t seed = 0;
};

#ifdef CONVOY_HAVE_ONNX
// The checkpoint's metadata that tells a user of the ONNX file how to feed it and read its
// output: the class names and the preprocessing, as the checkpoint writes them (JSON text).
const char* const kCarriedMetadata[] = {"class_names", "mean", "std", "preprocess", "input_shape",
                                        "horizontal_flip", "crop_padding", "best_accuracy"};

int run_export(const ExportArgs& args) {
  check_output_target(args.output, "the ONNX model");
  std::map<std::string, std::string> metadata;
  const bool yaml = std::filesystem::path(args.model).extension() == ".yaml";
  Model model = yaml ? Model::from_file(args.model, args.seed) : [&] {
    RunCheckpoint ckpt = read_run_checkpoint(args.model, CheckpointUse::inference);
    Model m = Model::from_yaml(ckpt.info.model_yaml, args.model + " (model_yaml)", 0);
    check_checkpoint_fits_model(ckpt.info, m, args.model);
    m.load_state(ckpt.tensors, args.model);
    return m;
  }();
  if (yaml) {
    metadata["convoy.weights"] = "untrained: initialized from seed " + std::to_string(args.seed);
  } else {
    const SafetensorsFile file = read_safetensors(args.model);
    for (const char* key : kCarriedMetadata)
      if (auto it = file.metadata.find(key); it != file.metadata.end()) metadata[key] = it->second;
  }
  metadata["convoy.input"] = "float32 (batch, C, H, W) after the preprocessing: pixels / 255, then (x - mean) / std per channel";
  const std::string bytes = export_onnx(model, metadata);
  write_file_atomically(args.output, "the ONNX model", bytes);
  std::cout << "exported " << model.name() << " (" << model.parameter_count() << " parameters) to " << args.output
            << ": ONNX opset " << kOnnxOpset << ", input 'input' (batch, " << shape_str(model.input_shape()).substr(1)
            << ", output 'logits' (batch, " << model.num_classes() << ")" << std::endl;
  return 0;
}
#else
int run_export(const ExportArgs&) {
  throw InputError("export: this convoy was built without ONNX (CONVOY_ONNX=OFF, or libonnx-dev and "
                   "libprotobuf-dev were missing when it was built)");
}
#endif

}  // namespace

void add_export_command(CLI::App& app, Action& chosen) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand("export", "Export a model to ONNX (opset 17)");
  cmd->add_option("--model,-m", args->model,
                  "a checkpoint written by convoy train or convoy import (.safetensors), or a model YAML "
                  "(untrained weights)")
      ->required();
  cmd->add_option("--format", args->format, "the output format")->check(CLI::IsMember({"onnx"}))->capture_default_str();
  cmd->add_option("--output,-o", args->output, "the ONNX file to write")->required();
  cmd->add_option("--seed", args->seed, "with a model YAML: the seed of its initial weights")->capture_default_str();
  cmd->callback([args, &chosen] { chosen = [args](const EngineOptions&) { return run_export(*args); }; });
}

}  // namespace convoy::cli
