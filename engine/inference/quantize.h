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

// The bounds of a calibrated range (largest |value| of a tensor). Below the lower one the
// tensor's int8 scale makes every value but zero saturate: a zeroed or corrupt file (all ranges
// 0 or 1e-45 gave 10% accuracy without a word), or a layer whose output calibration found zero.
// 0 is also "no range": a node fused into the next has no output of its own.
inline constexpr double kMinActivationRange = 1e-6;
inline constexpr double kMaxActivationRange = 1e30;

// Throws InputError "<source>: int8 activation range of layer '<name>' is <range>; ..." (of
// "the input" for kQuantInputName) unless the range is within the bounds above, or 0 where
// `quantized` is false (InferencePlan::quantized_outputs; the input is always quantized).
void check_activation_range(const std::string& name, double range, bool quantized, const std::string& source);

// Runs the fp32 plan over `batches` (each (N, C, H, W) f32 nchw, normalized as the model
// expects) and returns the largest |value| of the input ([0]) and of each graph node's output
// ([i + 1]): the min/max calibration of symmetric int8 (ranges are per tensor); 0 for a node
// fused into the next. A quantized output below kMinActivationRange (0 on every image) is an
// InputError naming the layer.
std::vector<float> calibrate_activation_max(Model& model, const std::vector<Tensor>& batches, int threads = 0);

// node_max by name: {"input": max, "<layer>": max, ...}.
std::map<std::string, double> activation_max_by_name(Model& model, const std::vector<float>& node_max);
// Back to the plan's order; a layer missing from `named`, a name not in the model, or a range
// check_activation_range refuses is an InputError naming `source`.
std::vector<float> activation_max_by_node(Model& model, const std::map<std::string, double>& named,
                                          const std::string& source);

}  // namespace convoy
