#pragma once
// A model as the steps of the GPU's 8-bit plan (EightBitGraph, Backend::compile_8bit): its graph
// in the CPU plan's fused groups (fuse_groups.h), each convolution with its batch norm folded
// into its weights and bias (in double, as the CPU plan folds), and the calibrated range of each
// group's output by the same node index as the CPU's int8 plans read it.
#include <string>
#include <vector>

#include "engine/backends/eight_bit.h"
#include "engine/core/precision.h"
#include "engine/graph/model.h"

namespace convoy {

// `model`'s f32 weights (on any device) and `node_range` (the input's range, then each graph
// node's: InferenceOptions::activation_max) as 8-bit steps in `type`. An InputError naming the
// layer where the model has a step the plan does not run (say, a batch norm after a pool, or a
// SiLU: the 8-bit convolutions fuse a ReLU only).
EightBitGraph eight_bit_graph(Model& model, const std::vector<float>& node_range, EightBitType type);

// The 8-bit type an 8-bit precision (is_eight_bit) runs in.
inline EightBitType eight_bit_type(Precision p) { return p == Precision::fp8 ? EightBitType::fp8 : EightBitType::int8; }

// Why `model` has no 8-bit GPU plan ("" where it has one): eight_bit_graph's refusal, without
// weights or ranges.
std::string eight_bit_unsupported_reason(Model& model);

}  // namespace convoy
