#include "engine/inference/eight_bit_graph.h"

#include <cmath>
#include <variant>

#include "engine/core/error.h"
#include "engine/inference/fuse_groups.h"
#include "engine/layers/batch_norm_fold.h"

namespace convoy {

namespace {

// The layer's weight and bias (zeros where it has none), batch norm `bn` folded in where given
// (batch_norm_fold.h).
void fold(Layer& layer, Layer* bn, EightBitStep& step) {
  const std::vector<Parameter*> params = layer.parameters();
  const Tensor& w = params.at(0)->value;
  std::vector<float> weight = w.to_floats();
  const auto k = static_cast<size_t>(w.dim(0));
  std::vector<float> bias = params.size() > 1 ? params[1]->value.to_floats() : std::vector<float>(k, 0.0f);
  if (bn) fold_batch_norm(batch_norm_affine(*bn), weight, bias);
  step.weight = Tensor::from_floats(weight, w.shape());
  step.bias = Tensor::from_floats(bias, {static_cast<int64_t>(k)});
}

[[noreturn]] void refuse(const Layer& layer, const std::string& why) {
  throw InputError("layer '" + layer.name() + "' (" + std::string(layer.type()) + "): " + why +
                   "; the GPU's 8-bit plan runs convolutions (with a folded batch norm, a residual add and a "
                   "ReLU), linear layers, pooling, flatten and dropout");
}

// The steps without weights or ranges where `with_weights` is false (the support check).
EightBitGraph build(Model& model, const std::vector<float>* node_range, EightBitType type, bool with_weights) {
  const std::vector<Model::GraphNode> nodes = model.graph_nodes();
  EightBitGraph g;
  g.type = type;
  g.input = model.input_shape();
  g.input_range = node_range ? node_range->at(0) : 0.0f;
  std::vector<int> value_of(nodes.size(), -1);  // node -> the value holding its output
  auto value = [&](int node) { return node < 0 ? 0 : value_of.at(static_cast<size_t>(node)); };
  auto shape_of = [&](int node) { return node < 0 ? model.input_shape() : nodes[static_cast<size_t>(node)].shape; };
  for (const Group& grp : fuse_groups(model, nodes)) {
    Layer& head = *nodes[grp.head].layer;
    const LayerSpec spec = head.spec();
    EightBitStep step;
    step.name = nodes[grp.last].layer->name();
    step.input = value(nodes[grp.head].inputs.at(0));
    step.shape = nodes[grp.last].shape;
    if (node_range && grp.last != model.output_node()) step.range = node_range->at(static_cast<size_t>(grp.last) + 1);
    if (grp.act >= 0) {
      if (!is_relu(nodes[grp.act].layer->spec())) refuse(*nodes[grp.act].layer, "an activation other than ReLU");
      step.relu = true;
    }
    if (const auto* conv = std::get_if<Conv2dSpec>(&spec)) {
      step.kind = EightBitStep::Kind::conv;
      step.conv = conv->params;
      if (grp.add >= 0) step.residual = value(grp.residual);
      if (with_weights) fold(head, grp.bn >= 0 ? nodes[grp.bn].layer : nullptr, step);
    } else if (std::holds_alternative<LinearSpec>(spec)) {
      step.kind = EightBitStep::Kind::linear;
      if (with_weights) fold(head, nullptr, step);
    } else if (const auto* pool = std::get_if<Pool2dSpec>(&spec)) {
      step.kind = pool->params.kind == PoolKind::max ? EightBitStep::Kind::max_pool : EightBitStep::Kind::avg_pool;
      step.pool = pool->params;
      step.range = 0;  // the input's
    } else if (const auto* global = std::get_if<GlobalPoolSpec>(&spec)) {
      const Shape in = shape_of(nodes[grp.head].inputs.at(0));
      step.kind = global->kind == PoolKind::max ? EightBitStep::Kind::max_pool : EightBitStep::Kind::avg_pool;
      step.pool = global->window(in.at(1), in.at(2));
      step.range = 0;
    } else if (std::holds_alternative<FlattenSpec>(spec)) {
      step.kind = EightBitStep::Kind::flatten;
    } else if (std::holds_alternative<DropoutSpec>(spec)) {
      value_of[grp.last] = step.input;  // nothing in evaluation
      continue;
    } else if (std::holds_alternative<BatchNormSpec>(spec)) {
      refuse(head, "a batch norm that does not follow a convolution it alone reads");
    } else {
      refuse(head, "no step of its kind");
    }
    g.steps.push_back(std::move(step));
    value_of[grp.last] = static_cast<int>(g.steps.size());
  }
  if (g.steps.empty() || value(model.output_node()) != static_cast<int>(g.steps.size()))
    throw InputError("model '" + model.name() + "': its output layer '" + model.output_layer() +
                     "' does not run last; the GPU's 8-bit plan ends with the logits");
  return g;
}

}  // namespace

EightBitGraph eight_bit_graph(Model& model, const std::vector<float>& node_range, EightBitType type) {
  CONVOY_CHECK(node_range.size() == model.graph_nodes().size() + 1, "eight_bit_graph: one range per node and the input");
  return build(model, &node_range, type, true);
}

std::string eight_bit_unsupported_reason(Model& model) {
  try {
    build(model, nullptr, EightBitType::int8, false);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace convoy
