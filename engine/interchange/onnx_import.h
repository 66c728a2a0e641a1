#pragma once
// ONNX import: an ONNX CNN built from the ops Convoy has, as a Convoy model YAML and its weights
// under Convoy's state-dict names.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/core/named_tensor.h"

namespace convoy {

struct ImportedModel {
  std::string yaml;                   // a model YAML (Model::from_yaml builds it)
  std::vector<NamedTensor> tensors;   // "<layer>.weight", "<layer>.running_var", ... (f32, CPU)
  std::map<std::string, std::string> metadata;  // the file's metadata_props
};

// Reads `path` (a serialized ModelProto, one image input (N, C, H, W), one output (N, classes))
// and maps its nodes to layers: Conv, BatchNormalization (inference), Relu, LeakyRelu, Gelu (and
// its erf formula), Sigmoid (and SiLU's x * Sigmoid(x)), HardSigmoid, HardSwish, Clip (0, 6),
// MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, ReduceMean over H and W, Gemm, MatMul
// (+ Add of a bias), Flatten, Add, Concat, Dropout, Identity; pads of zero, and the shape
// arithmetic of a Reshape to (N, -1) (Shape, Gather, Unsqueeze, Concat), fold into what they
// mean. A node of another op, or with an attribute Convoy's layer cannot honour (asymmetric
// padding, ceil_mode where it adds a window, ...), is an InputError naming the file, the node and
// the op. `name` is the model's name when the graph has none.
ImportedModel import_onnx(const std::filesystem::path& path, const std::string& name);

}  // namespace convoy
