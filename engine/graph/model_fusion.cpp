// Model's fusions: ReLUs and residual adds taken over by the layer before them (fuse_relus, on
// every to()), and, for inference, batch norms folded into their convolutions (fold_batch_norms).
#include <variant>
#include <vector>

#include "engine/graph/model.h"

namespace convoy {

int Model::fold_batch_norms(Backend& backend) {
  if (!fusion_) return 0;
  const std::vector<int> readers = reader_counts();
  int folded = 0;
  for (Node& node : nodes_) {
    if (!std::holds_alternative<BatchNormSpec>(node.layer->spec()) || node.inputs.size() != 1) continue;
    const int src = node.inputs[0];
    if (src < 0 || readers[src] != 1 || src == output_node_ || nodes_[src].folded ||
        !std::holds_alternative<Conv2dSpec>(nodes_[src].layer->spec()))
      continue;
    if (!node.layer->fold_conv(backend, *nodes_[src].layer)) continue;
    nodes_[src].folded = true;
    ++folded;
  }
  if (folded) ++weights_version_;  // recordings of the unfolded forward are stale
  return folded;
}

int Model::folded_batch_norms() const {
  int n = 0;
  for (const Node& node : nodes_) n += node.folded;
  return n;
}

std::vector<int> Model::reader_counts() const {
  std::vector<int> readers(nodes_.size(), 0);
  for (const Node& node : nodes_)
    for (int src : node.inputs)
      if (src >= 0) ++readers[src];
  return readers;
}

void Model::fuse_relus() {
  const std::vector<int> readers = reader_counts();
  for (Node& node : nodes_) {
    node.layer->unfold_conv();  // fold_batch_norms is undone: to() moved the weights it folded
    node.folded = false;
    node.fused = node.relu_after = node.runs_at_join = false;
    node.adds_from = -1;
    node.layer->fuse_relu(false);
  }
  add_input_grads_ = fusion_;
  if (!add_input_grads_) return;
  // A ReLU fuses into the layer it reads when nothing else reads that layer's output (which
  // then holds relu(output)) and that output is not the model's.
  for (Node& node : nodes_) {
    if (!is_relu(node.layer->spec()) || node.inputs.size() != 1) continue;
    const int src = node.inputs[0];
    if (src < 0 || readers[src] != 1 || src == output_node_) continue;
    node.fused = nodes_[src].layer->fuse_relu(true);
    nodes_[src].relu_after = node.fused;
  }
  // A residual join's add (and its fused ReLU) goes into a layer it reads that can add in its
  // own pass, where nothing else reads that layer's output: relu(bn(x) + other) in one pass
  // instead of bn(x) written, then read back with the other input.
  for (Node& node : nodes_) {
    if (!std::holds_alternative<AddSpec>(node.layer->spec()) || node.inputs.size() != 2) continue;
    for (size_t side = 0; side < 2; ++side) {
      const int src = node.inputs[side], other = node.inputs[1 - side];
      if (src < 0 || src == other || readers[src] != 1 || src == output_node_ || nodes_[src].runs_at_join ||
          !nodes_[src].layer->adds_residual())
        continue;
      nodes_[src].runs_at_join = true;
      node.adds_from = src;
      break;
    }
  }
}

int Model::fused_adds() const {
  int n = 0;
  for (const Node& node : nodes_) n += node.adds_from >= 0 ? 1 : 0;
  return n;
}

int Model::fused_relus() const {
  int n = 0;
  for (const Node& node : nodes_) n += node.fused ? 1 : 0;
  return n;
}

}  // namespace convoy
