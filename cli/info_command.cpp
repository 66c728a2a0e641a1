// convoy info --model models/resnet50.yaml  |  --model runs/x/best.safetensors
// A layer table in the manner of torchinfo or Keras' summary(), then the totals.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "engine/bundle/run_checkpoint.h"
#include "engine/graph/model.h"

namespace convoy::cli {

namespace {

struct InfoArgs {
  std::string model;
};

// 11689512 -> "11,689,512"
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<size_t>(i), ",");
  return (n < 0 ? "-" : "") + digits;
}

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string mib(int64_t bytes) { return fixed(static_cast<double>(bytes) / (1024.0 * 1024.0), 2) + " MiB"; }

// A model YAML, or a checkpoint of `convoy train` whose metadata holds its model's YAML.
Model load(const std::string& path) {
  if (path.size() >= 12 && path.ends_with(".safetensors")) {
    const RunCheckpoint ckpt = read_run_checkpoint(path, CheckpointUse::inference);
    return Model::from_yaml(ckpt.info.model_yaml, path + " (model_yaml)", 0);
  }
  return Model::from_file(path, 0);
}

int run_info(const InfoArgs& args) {
  const Model model = load(args.model);
  const std::vector<LayerInfo> layers = model.layer_infos();

  struct Row {
    std::string cells[6];
  };
  std::vector<Row> rows;
  rows.push_back({{"layer", "type", "inputs", "output", "params", "MFLOPs"}});
  for (const LayerInfo& l : layers) {
    std::string inputs;
    if (!l.reads_previous)
      for (const std::string& s : l.inputs) inputs += (inputs.empty() ? "" : ", ") + s;
    rows.push_back({{l.name, l.type, inputs, shape_str(l.output), l.parameters ? grouped(l.parameters) : "-",
                     fixed(static_cast<double>(l.flops) / 1e6, 2)}});
  }
  size_t width[6] = {};
  for (const Row& r : rows)
    for (int c = 0; c < 6; ++c) width[c] = std::max(width[c], r.cells[c].size());
  const bool right[6] = {false, false, false, false, true, true};
  std::ostringstream out;
  out << "model " << model.name() << ": input " << shape_str(model.input_shape()) << ", " << model.num_classes()
      << " classes, " << layers.size() << " layers\n";
  size_t line_width = 0;
  for (int c = 0; c < 6; ++c) line_width += width[c] + (c ? 2 : 0);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::string line;
    for (int c = 0; c < 6; ++c) {
      const std::string& cell = rows[i].cells[c];
      const std::string pad(width[c] - cell.size(), ' ');
      line += (c ? "  " : "") + (right[c] ? pad + cell : cell + (c < 5 ? pad : ""));
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
    if (i == 0) out << std::string(line_width, '-') << "\n";
  }
  out << std::string(line_width, '-') << "\n";

  const int64_t params = model.parameter_count(), buffers = model.buffer_count();
  const int64_t flops = model.forward_flops(), activations = model.activation_count();
  out << "parameters: " << grouped(params) << " trainable, " << grouped(buffers) << " in buffers ("
      << mib(4 * (params + buffers)) << " in fp32)\n";
  out << "forward: " << fixed(static_cast<double>(flops) / 1e9, 3)
      << " GFLOPs per sample (a multiply-add counts 2; batch norm, activations, adds and pooling included)\n";
  out << "activations: " << grouped(activations) << " values per sample, " << mib(4 * activations)
      << " in fp32 (every layer's output, as a training forward keeps them for backward)\n";
  std::cout << out.str();
  return 0;
}

}  // namespace

void add_info_command(CLI::App& app, Action& chosen) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* cmd = app.add_subcommand("info", "Show a model's layers, output shapes, parameters and FLOPs");
  cmd->add_option("--model,-m", args->model, "a model YAML, or a checkpoint written by convoy train (.safetensors)")
      ->required();
  cmd->callback([args, &chosen] { chosen = [args](const EngineOptions&) { return run_info(*args); }; });
}

}  // namespace convoy::cli
