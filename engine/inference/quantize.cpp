#include "engine/inference/quantize.h"

#include <cmath>
#include <memory>
#include <sstream>

#include "engine/core/error.h"
#include "engine/inference/inference_plan.h"

namespace convoy {

void check_activation_range(const std::string& name, double range, bool quantized, const std::string& source) {
  if ((range == 0 && !quantized) || (range >= kMinActivationRange && range <= kMaxActivationRange)) return;
  std::ostringstream out;
  out << source << ": int8 activation range of " << (name == kQuantInputName ? "the input" : "layer '" + name + "'")
      << " is " << range;
  if (range == 0)
    out << ", but the int8 plan quantizes that tensor with it (every value but 0 would saturate)";
  else
    out << "; expected a finite number from " << kMinActivationRange << " to " << kMaxActivationRange
        << " (or 0 for a layer fused into the next)"
        << (range > 0 && range < kMinActivationRange ? ": a smaller range makes every int8 value of that tensor saturate"
                                                      : "");
  out << "; the file is damaged or was not written by convoy quantize: quantize the fp32 checkpoint again";
  throw InputError(out.str());
}

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
  const std::vector<Model::GraphNode> nodes = model.graph_nodes();
  const std::vector<bool> quantized = InferencePlan::quantized_outputs(model);
  for (size_t i = 0; i < node_max.size(); ++i)
    if ((i == 0 || quantized[i - 1]) && node_max[i] < kMinActivationRange) {
      std::ostringstream out;
      out << "calibration of model '" << model.name() << "': "
          << (i == 0 ? std::string("the input") : "the output of layer '" + nodes[i - 1].layer->name() + "'")
          << " is at most " << node_max[i] << " on every calibration image: too small a range to quantize (at least "
          << kMinActivationRange << "); calibrate on other images, or check the model's weights";
      throw InputError(out.str());
    }
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
  const std::vector<bool> quantized = InferencePlan::quantized_outputs(model);
  auto take = [&](const std::string& name, bool used) {
    auto it = named.find(name);
    if (it == named.end())
      throw InputError(source + ": checkpoint metadata 'int8_activation_max' has no range for '" + name + "'");
    check_activation_range(name, it->second, used, source);
    return static_cast<float>(it->second);
  };
  out[0] = take(kQuantInputName, true);
  for (size_t i = 0; i < nodes.size(); ++i) out[i + 1] = take(nodes[i].layer->name(), quantized[i]);
  if (named.size() != nodes.size() + 1)
    throw InputError(source + ": checkpoint metadata 'int8_activation_max' has " + std::to_string(named.size()) +
                     " ranges, the model " + std::to_string(nodes.size() + 1) + " tensors (input and layers)");
  return out;
}

}  // namespace convoy
