#pragma once
// ONNX export: a Convoy model as an ONNX ModelProto (opset 17), written through the ONNX
// protobuf definitions Debian ships (libonnx-dev), so that ONNX Runtime, TensorRT or Triton run it.
#include <cstdint>
#include <map>
#include <string>

#include "engine/graph/model.h"

namespace convoy {

inline constexpr int64_t kOnnxOpset = 17;

// The model's graph in inference mode: input "input" (batch, C, H, W) with a symbolic batch
// dimension, output "logits" (batch, classes); weights and batch-norm statistics as
// initializers under their state-dict names; batch norm as BatchNormalization nodes; dropout
// as Dropout (an identity outside training); gelu as its erf formula (Gelu is opset 20),
// silu as Sigmoid and Mul (as torch.onnx writes it), relu6 as Clip(0, 6).
// `metadata` goes into metadata_props (class names, preprocessing). Returns the serialized
// ModelProto. `model` must be on the CPU (as built).
std::string export_onnx(Model& model, const std::map<std::string, std::string>& metadata);

}  // namespace convoy
