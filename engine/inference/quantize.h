#pragma once
// Post-training int8 quantization for the CPU inference plan: calibration of every tensor's
// range on sample inputs, and those ranges as a checkpoint stores them (by layer name).
// Weights need no calibration: the plan gives each output channel its own symmetric s8 scale.
#include <map>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/graph/model.h"

namespace convoy {

// The name under which the model input's range is stored (layer names are the others).
inline constexpr const char* kQuantInputName = "input";

// Runs the fp32 plan over `batches` (each (N, C, H, W) f32 nchw, normalized as the model
// expects) and returns the largest |value| of the input ([0]) and of each graph node's output
// ([i + 1]): the min/max calibration of symmetric int8 (ranges are per tensor).
std::vector<float> calibrate_activation_max(Model& model, const std::vector<Tensor>& batches, int threads = 0);

// node_max by name: {"input": max, "<layer>": max, ...}.
std::map<std::string, double> activation_max_by_name(Model& model, const std::vector<float>& node_max);
// Back to the plan's order; a layer missing from `named`, or a name not in the model, is an
// InputError naming `source`.
std::vector<float> activation_max_by_node(Model& model, const std::map<std::string, double>& named,
                                          const std::string& source);

}  // namespace convoy
