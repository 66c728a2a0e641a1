// convoy import model.onnx -o model.yaml [--weights model.safetensors]
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "engine/checkpoint/safetensors.h"
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
};

#ifdef CONVOY_HAVE_ONNX
int run_import(const ImportArgs& args) {
  namespace fs = std::filesystem;
  const std::string stem = fs::path(args.output).stem().string();
  const std::string weights = args.weights.empty() ? (fs::path(args.output).replace_extension(".safetensors")).string()
                                                   : args.weights;
  if (fs::absolute(weights).lexically_normal() == fs::absolute(args.output).lexically_normal())
    throw InputError(weights + ": both the model YAML and its weights; name the weights another file (--weights)");
  check_output_target(args.output, "the model YAML");
  check_output_target(weights, "the weights");
  const ImportedModel imported = import_onnx(args.input, stem.empty() ? "imported" : stem);
  // Built here once, so that a model Convoy cannot build fails before anything is written.
  Model model = Model::from_yaml(imported.yaml, args.input + " (imported)", 0);
  model.load_state(imported.tensors, args.input);
  // Both files are written before either replaces anything, and the YAML goes last: a failed
  // write leaves neither, and the YAML never appears without its weights.
  OutputFile yaml(args.output, "the model YAML");
  OutputFile weights_file(weights, "the weights");
  yaml.write(imported.yaml);
  write_safetensors(weights_file, imported.tensors, {{"source", fs::path(args.input).filename().string()}});
  weights_file.commit();
  yaml.commit();
  std::cout << "imported " << args.input << ": " << model.layer_infos().size() << " layers, "
            << model.parameter_count() << " parameters; model " << args.output << ", weights " << weights
            << " (load them with convoy train --init-weights)" << std::endl;
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
  CLI::App* cmd = app.add_subcommand("import", "Import an ONNX CNN as a model YAML and its weights");
  cmd->add_option("model", args->input, "the ONNX file")->required();
  cmd->add_option("--output,-o", args->output, "the model YAML to write")->required();
  cmd->add_option("--weights", args->weights, "the weights (safetensors) to write; default: beside -o, .safetensors");
  cmd->callback([args, &chosen] { chosen = [args](const EngineOptions&) { return run_import(*args); }; });
}

}  // namespace convoy::cli
