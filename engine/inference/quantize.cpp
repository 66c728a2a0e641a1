#include "engine/inference/quantize.h"

#include <cmath>
#include <memory>

#include "engine/core/error.h"
#include "engine/inference/inference_plan.h"

namespace convoy {

std::vector<float> calibrate_activation_max(Model& model, const std::vector<Tensor>& batches, int threads) {
  if (batches.empty()) throw InputError("calibration of model '" + model.name() + "': no calibration images");
  InferenceOptions options;
  options.threads = threads;
  std::map<int64_t, std::unique_ptr<InferencePlan>> plans;  // one per batch size (the last may be smaller)
  std::vector<float> node_max(model.graph_nodes().size() + 1, 0.0f);
  for (const Tensor& x : batches) {
    auto& plan = plans[x.dim(0)];
    if (!plan) plan = std::make_unique<InferencePlan>(model, x.dim(0), options);
    plan->calibrate(x, node_max);
  }
  for (float v : node_max)
    if (!std::isfinite(v)) throw NumericError("calibration of model '" + model.name() + "': a range is not finite");
  return node_max;
}

std::map<std::string, double> activation_max_by_name(Model& model, const std::vector<float>& node_max) {
  const std::vector<Model::GraphNode> nodes = model.graph_nodes();
  CONVOY_CHECK(node_max.size() == nodes.size() + 1, "activation ranges: one per node and the input");
  std::map<std::string, double> named{{kQuantInputName, node_max[0]}};
  for (size_t i = 0; i < nodes.size(); ++i) named[nodes[i].layer->name()] = node_max[i + 1];
  return named;
}

std::vector<float> activation_max_by_node(Model& model, const std::map<std::string, double>& named,
                                          const std::string& source) {
  const std::vector<Model::GraphNode> nodes = model.graph_nodes();
  std::vector<float> out(nodes.size() + 1, 0.0f);
  auto take = [&](const std::string& name) {
    auto it = named.find(name);
    if (it == named.end())
      throw InputError(source + ": checkpoint metadata 'int8_activation_max' has no range for '" + name + "'");
    if (!std::isfinite(it->second) || it->second < 0 || it->second > 1e30)
      throw InputError(source + ": checkpoint metadata 'int8_activation_max': '" + name + "' is " +
                       std::to_string(it->second) + " (expected a finite range >= 0)");
    return static_cast<float>(it->second);
  };
  out[0] = take(kQuantInputName);
  for (size_t i = 0; i < nodes.size(); ++i) out[i + 1] = take(nodes[i].layer->name());
  if (named.size() != nodes.size() + 1)
    throw InputError(source + ": checkpoint metadata 'int8_activation_max' has " + std::to_string(named.size()) +
                     " ranges, the model " + std::to_string(nodes.size() + 1) + " tensors (input and layers)");
  return out;
}

}  // namespace convoy
