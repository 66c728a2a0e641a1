// convoy import model.onnx -o model.yaml [--weights model.safetensors] [--class-names F] [--mean ..] [--std ..]
#include <filesystem>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "engine/bundle/run_checkpoint.h"
#include "engine/core/error.h"
#include "engine/core/file_io.h"
#include "engine/graph/model.h"
#ifdef CONVOY_HAVE_ONNX
#include "engine/interchange/onnx_import.h"
#endif

namespace convoy::cli {

namespace {

struct ImportArgs {
  std::string input;
  std::string output;
  std::string weights;
  std::string class_names;  // a text file, one name a line
  std::vector<double> mean, std;
};

#ifdef CONVOY_HAVE_ONNX
// The class names of --class-names FILE: one a line, blank lines and trailing spaces dropped.
std::vector<std::string> read_class_names(const std::string& path) {
  std::istringstream lines(read_text_file(path, "the class names", 64 << 20));
  std::vector<std::string> names;
  for (std::string line; std::getline(lines, line);) {
    line.erase(line.find_last_not_of(" \t\r") + 1);
    if (!line.empty()) names.push_back(line);
  }
  return names;
}

// The checkpoint's metadata: what the flags say, else what the ONNX file's metadata_props say under
// the checkpoint's own keys (class_names, mean, std, preprocess: as `convoy export` writes them),
// else defaults, each default said in one line on `log`. Checked as convoy infer and serve will read it.
RunCheckpointInfo imported_checkpoint_info(const ImportArgs& args, const std::string& model_yaml, const Model& model,
                                           const std::map<std::string, std::string>& props, std::ostream& log) {
  std::map<std::string, std::string> metadata = {{"model_yaml", model_yaml}};
  for (const char* key : {"class_names", "mean", "std", "preprocess"})
    if (auto it = props.find(key); it != props.end()) metadata[key] = it->second;
  if (!args.class_names.empty()) {
    metadata["class_names"] = nlohmann::json(read_class_names(args.class_names)).dump();
  } else if (!metadata.count("class_names")) {
    std::vector<std::string> names;
    for (int64_t c = 0; c < model.num_classes(); ++c) names.push_back(std::to_string(c));
    metadata["class_names"] = nlohmann::json(names).dump();
    log << "class names: none in " << args.input << "'s metadata_props ('class_names'): the classes are named 0 ... "
        << model.num_classes() - 1 << " (--class-names FILE names them)\n";
  }
  if (!args.mean.empty()) metadata["mean"] = nlohmann::json(args.mean).dump();
  if (!args.std.empty()) metadata["std"] = nlohmann::json(args.std).dump();
  if (!metadata.count("mean") || !metadata.count("std")) {
    const bool neither = !metadata.count("mean") && !metadata.count("std");
    if (!metadata.count("mean")) metadata["mean"] = "[0.0]";
    if (!metadata.count("std")) metadata["std"] = "[1.0]";
    log << "normalization: " << (neither ? "no 'mean' or 'std'" : "only one of 'mean' and 'std'") << " in "
        << args.input << "'s metadata_props: the input is pixels / 255, mean " << metadata["mean"] << ", std "
        << metadata["std"] << " (--mean and --std set them, e.g. ImageNet's 0.485,0.456,0.406 and 0.229,0.224,0.225)\n";
  }
  if (!metadata.count("preprocess"))
    log << "preprocessing: none in " << args.input << "'s metadata_props ('preprocess'): each image is resized "
        << "whole to " << model.input_shape()[1] << "x" << model.input_shape()[2] << "\n";
  const std::string source = args.input + " (metadata_props, --class-names, --mean, --std)";
  RunCheckpointInfo info;
  try {
    info = read_run_checkpoint_metadata(metadata, source, CheckpointUse::inference);
    check_checkpoint_fits_model(info, model, source);
  } catch (const InputError& e) {  // another tool's metadata under the same key: the flags replace it
    throw InputError(std::string(e.what()) + " (--class-names, --mean and --std replace the file's)");
  }
  const Shape& in = model.input_shape();  // (C, H, W)
  if (info.preprocess && (info.preprocess->channels != in[0] || info.preprocess->height != in[1] ||
                          info.preprocess->width != in[2]))
    throw InputError(source + ": metadata 'preprocess' makes " +
                     shape_str({info.preprocess->channels, info.preprocess->height, info.preprocess->width}) +
                     " images for a model whose input is " + shape_str(in));
  info.input_shape = in;
  info.precision = Precision::fp32;
  return info;
}

int run_import(const ImportArgs& args) {
  namespace fs = std::filesystem;
  const std::string stem = fs::path(args.output).stem().string();
  const std::string weights = args.weights.empty() ? (fs::path(args.output).replace_extension(".safetensors")).string()
                                                   : args.weights;
  if (fs::absolute(weights).lexically_normal() == fs::absolute(args.output).lexically_normal())
    throw InputError(weights + ": both the model YAML and its weights; name the weights another file (--weights)");
  check_output_target(args.output, "the model YAML");
  check_output_target(weights, "the checkpoint");
  const ImportedModel imported = import_onnx(args.input, stem.empty() ? "imported" : stem);
  // Built here once, so that a model Convoy cannot build fails before anything is written.
  Model model = Model::from_yaml(imported.yaml, args.input + " (imported)", 0);
  model.load_state(imported.tensors, args.input);
  const RunCheckpointInfo info = imported_checkpoint_info(args, imported.yaml, model, imported.metadata, std::cout);
  // Both files are written before either replaces anything, and the YAML goes last: a failed
  // write leaves neither, and the YAML never appears without its weights.
  OutputFile yaml(args.output, "the model YAML");
  OutputFile checkpoint(weights, "the checkpoint");
  yaml.write(imported.yaml);
  save_run_checkpoint(checkpoint, model, {}, info);
  checkpoint.commit();
  yaml.commit();
  std::cout << "imported " << args.input << ": " << model.layer_infos().size() << " layers, "
            << model.parameter_count() << " parameters, " << info.class_names.size() << " classes; model "
            << args.output
            << ", checkpoint " << weights << " (convoy infer, export and serve take it as it is; convoy train "
            << "--init-weights starts from it)" << std::endl;
  return 0;
}
#else
int run_import(const ImportArgs&) {
  throw InputError("import: this convoy was built without ONNX (CONVOY_ONNX=OFF, or libonnx-dev and "
                   "libprotobuf-dev were missing when it was built)");
}
#endif

}  // namespace

void add_import_command(CLI::App& app, Action& chosen) {
  auto args = std::make_shared<ImportArgs>();
  CLI::App* cmd = app.add_subcommand("import", "Import an ONNX CNN as a model YAML and a Convoy checkpoint");
  cmd->add_option("model", args->input, "the ONNX file")->required();
  cmd->add_option("--output,-o", args->output, "the model YAML to write")->required();
  cmd->add_option("--weights", args->weights,
                  "the checkpoint (safetensors: the weights, the model YAML, class names, normalization) to write; "
                  "default: beside -o, .safetensors");
  cmd->add_option("--class-names", args->class_names,
                  "a text file of the class names, one a line (default: the ONNX metadata_props' class_names, else "
                  "0 ... N-1)");
  cmd->add_option("--mean", args->mean,
                  "per-channel mean on the [0, 1] scale, e.g. 0.485,0.456,0.406 (default: the ONNX metadata_props' "
                  "mean, else 0)")
      ->delimiter(',');
  cmd->add_option("--std", args->std,
                  "per-channel standard deviation on the [0, 1] scale (default: the ONNX metadata_props' std, else 1)")
      ->delimiter(',');
  cmd->callback([args, &chosen] { chosen = [args](const EngineOptions&) { return run_import(*args); }; });
}

}  // namespace convoy::cli
