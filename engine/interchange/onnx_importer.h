#pragma once
// The ONNX importer's state, shared by onnx_import.cpp (one node, one layer; the YAML) and
// onnx_import_patterns.cpp (what takes several nodes, or none: GELU's and SiLU's formulas, the
// shape arithmetic of a flatten, pads of zero, ceil_mode's check). Internal to engine/interchange.
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/named_tensor.h"
#include "engine/interchange/onnx_import.h"

namespace convoy::onnx_import {

using onnx::AttributeProto;
using onnx::NodeProto;
using onnx::TensorProto;

// One Convoy layer as it goes into the YAML: type names and the defaults left out are the specs'
// (engine/layers/layer_spec.h).
struct YamlLayer {
  std::string name;
  std::string_view type;
  std::vector<std::string> inputs;                        // Convoy layer names, "input"
  std::vector<std::pair<std::string, std::string>> attrs;  // key, YAML value
};

std::string ints_yaml(const std::vector<int64_t>& v);
std::string number_yaml(double v);

// An int64 vector computed from tensor shapes, as torch.onnx writes x.view(x.size(0), -1):
// Shape, Gather, Unsqueeze, Concat. Each element is a constant, the batch size (dimension 0 of
// any tensor: every Convoy tensor is a batch) or another dimension, which the import does not
// track. Shape(x) itself is `whole` (its length is x's rank, unknown here).
struct ShapeValue {
  enum class Elem : uint8_t { constant, batch, other };
  std::vector<std::pair<Elem, int64_t>> elems;  // (kind, the constant)
  bool whole = false;
  bool scalar = false;  // a 0-d Gather result, before Unsqueeze
};

class Importer {
 public:
  Importer(const onnx::ModelProto& proto, std::string source) : proto_(proto), source_(std::move(source)) {}

  ImportedModel run(const std::string& fallback_name);

 private:
  [[noreturn]] void fail_node(const NodeProto& node, const std::string& message) const {
    throw InputError(source_ + ": node '" + node.name() + "' (op " + node.op_type() + "): " + message);
  }
  [[noreturn]] void fail(const std::string& message) const { throw InputError(source_ + ": " + message); }

  const AttributeProto* attr(const NodeProto& node, const std::string& name) const {
    for (const AttributeProto& a : node.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  int64_t attr_int(const NodeProto& node, const std::string& name, int64_t fallback) const {
    const AttributeProto* a = attr(node, name);
    return a ? a->i() : fallback;
  }
  double attr_float(const NodeProto& node, const std::string& name, double fallback) const {
    const AttributeProto* a = attr(node, name);
    return a ? a->f() : fallback;
  }
  std::vector<int64_t> attr_ints(const NodeProto& node, const std::string& name, std::vector<int64_t> fallback) const {
    const AttributeProto* a = attr(node, name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : fallback;
  }

  bool is_constant(const std::string& value) const { return constants_.count(value) > 0; }
  // An f32 constant (initializer or Constant node) as a CPU tensor.
  Tensor constant(const NodeProto& node, const std::string& value) const;
  // An f32 constant of one element.
  double scalar(const NodeProto& node, const std::string& value) const;
  bool is_int_constant(const std::string& value) const;
  // An int64 or int32 constant's values (any shape, flattened).
  std::vector<int64_t> int_constant(const NodeProto& node, const std::string& value) const;
  // The Convoy layer that holds an ONNX value.
  const std::string& layer_of(const NodeProto& node, const std::string& value) const {
    auto it = layer_of_.find(value);
    if (it == layer_of_.end()) {
      if (shape_values_.count(value))
        fail_node(node, "its input '" + value + "' is computed from tensor shapes, which the import folds only "
                        "into a Reshape to (N, -1) or a Resize's sizes");
      fail_node(node, "its input '" + value + "' is not the graph input, a supported node's output or a constant");
    }
    return it->second;
  }
  std::string unique_name(const NodeProto& node, const std::string& weight_value);
  void windows(const NodeProto& node, YamlLayer& layer, const std::vector<int64_t>& kernel, bool pool);
  void add_layer(const NodeProto& node, YamlLayer layer) {
    layer_of_[node.output(0)] = layer.name;
    layers_.push_back(std::move(layer));
  }
  void convert(const NodeProto& node);
  bool scalar_is(const std::string& value, double expected) const;

  // onnx_import_patterns.cpp. Each returns true when it took the node (made its layer, or
  // folded it into what it means).
  size_t gelu_formula_at(const std::vector<const NodeProto*>& nodes, size_t i);
  bool convert_activation(const NodeProto& node);  // Sigmoid (SiLU's too), HardSigmoid, HardSwish, Clip
  bool convert_shape_arithmetic(const NodeProto& node);  // Shape, Gather, Unsqueeze, Concat of shapes, Reshape, Cast
  bool convert_pad(const NodeProto& node);
  bool convert_reduce_mean(const NodeProto& node);
  // onnx_import_resize.cpp: Resize and Upsample (scales, or sizes computed from shapes), Softmax.
  bool convert_resize(const NodeProto& node);
  bool convert_softmax(const NodeProto& node);
  // What only the built model's shapes can check: a Softmax's axis -1 (or 1 before opset 13) is
  // its input's channels, a Resize's constant sizes keep its input's channels.
  void check_on_built_model(const std::string& yaml) const;
  // ceil_mode pooling whose windows are floor's at the model's input size; else an InputError.
  void check_ceil_mode(const std::string& yaml) const;

  const onnx::ModelProto& proto_;
  std::string source_;
  std::map<std::string, const TensorProto*> constants_;
  std::map<std::string, std::string> layer_of_;  // ONNX value -> Convoy layer
  std::map<std::string, ShapeValue> shape_values_;  // ONNX value -> what it holds
  std::map<std::string, std::vector<const NodeProto*>> consumers_;  // ONNX value -> the nodes reading it
  std::set<const NodeProto*> absorbed_;  // nodes already part of an earlier node's layer (SiLU's Mul)
  std::vector<std::pair<std::string, const NodeProto*>> ceil_pools_;  // pooling layers with ceil_mode 1
  std::vector<std::pair<std::string, const NodeProto*>> flat_softmaxes_;  // softmax layers that need 1-d inputs
  struct ResizeChannels {
    std::string layer;
    const NodeProto* node;
    int64_t channels;  // what the ONNX sizes say
  };
  std::vector<ResizeChannels> resize_channels_;
  int64_t input_batch_ = -1;  // the graph input's batch size where the file fixes it
  std::set<std::string> taken_{"input"};
  std::vector<YamlLayer> layers_;
  std::vector<NamedTensor> tensors_;
  std::set<std::string> bias_free_linear_;  // MatMul layers whose bias may follow as an Add
};

}  // namespace convoy::onnx_import
