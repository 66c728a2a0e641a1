#pragma once
// The fused steps a compiled plan runs (the CPU's InferencePlan, the GPU's 8-bit plan): a model's
// graph nodes in groups whose last node's output is the one tensor the group writes, and the
// one a calibration gives a range (InferencePlan::quantized_outputs). Internal to engine/inference.
#include <vector>

#include "engine/graph/model.h"

namespace convoy {

// Layers fused into one step: a convolution (or a batch norm alone), its batch norm, a residual
// add and an activation; or a linear layer and its activation; or one other layer.
struct Group {
  int head = -1;      // the first node: conv2d, batchnorm2d, linear, pooling, activation, add, alias
  int bn = -1;        // batchnorm2d folded into the conv
  int add = -1;       // add fused as a sum post-op; `residual` is its other input
  int residual = -2;  // node index, -1 = the model input
  int act = -1;       // activation post-op
  int last = -1;      // the node whose output this group produces
};

// The steps a plan of `model` runs: its graph's nodes in fused groups, in the order they run.
std::vector<Group> fuse_groups(const Model& model, const std::vector<Model::GraphNode>& nodes);

}  // namespace convoy
