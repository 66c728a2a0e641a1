#include "engine/interchange/onnx_export.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <variant>

#include "engine/core/error.h"

namespace convoy {

namespace {

using onnx::AttributeProto;
using onnx::NodeProto;
using onnx::TensorProto;

void set_ints(NodeProto& node, const std::string& name, const std::vector<int64_t>& values) {
  AttributeProto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

void set_int(NodeProto& node, const std::string& name, int64_t value) {
  AttributeProto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::INT);
  a->set_i(value);
}

void set_string(NodeProto& node, const std::string& name, const std::string& value) {
  AttributeProto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::STRING);
  a->set_s(value);
}

void set_float(NodeProto& node, const std::string& name, double value) {
  AttributeProto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::FLOAT);
  a->set_f(static_cast<float>(value));
}

// Builds the graph node by node; node names are the layer's, with a suffix for helper nodes.
class GraphWriter {
 public:
  explicit GraphWriter(onnx::GraphProto& graph) : graph_(graph) {}

  NodeProto& node(const std::string& op, const std::string& name, const std::vector<std::string>& inputs,
                  const std::string& output) {
    NodeProto* n = graph_.add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const std::string& in : inputs) n->add_input(in);
    n->add_output(output);
    return *n;
  }

  // An f32 initializer; `t` is on the CPU.
  void initializer(const std::string& name, const Tensor& t) {
    TensorProto* p = graph_.add_initializer();
    p->set_name(name);
    p->set_data_type(TensorProto::FLOAT);
    for (int64_t d : t.shape()) p->add_dims(d);
    p->set_raw_data(t.raw(), t.nbytes());  // little-endian f32, as ONNX's raw_data wants
  }

  // A 1-d int64 constant (Unsqueeze's axes, Resize's sizes).
  void ints(const std::string& name, const std::vector<int64_t>& values) {
    TensorProto* p = graph_.add_initializer();
    p->set_name(name);
    p->set_data_type(TensorProto::INT64);
    p->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) p->add_int64_data(v);
  }

  // A 1-d f32 constant.
  void floats(const std::string& name, const std::vector<float>& values) {
    TensorProto* p = graph_.add_initializer();
    p->set_name(name);
    p->set_data_type(TensorProto::FLOAT);
    p->add_dims(static_cast<int64_t>(values.size()));
    for (float v : values) p->add_float_data(v);
  }

  void scalar(const std::string& name, float value) {
    TensorProto* p = graph_.add_initializer();
    p->set_name(name);
    p->set_data_type(TensorProto::FLOAT);
    p->add_float_data(value);
  }

 private:
  onnx::GraphProto& graph_;
};

void value_info(onnx::ValueInfoProto& v, const std::string& name, const Shape& sample) {
  v.set_name(name);
  auto* tensor = v.mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(TensorProto::FLOAT);
  auto* shape = tensor->mutable_shape();
  shape->add_dim()->set_dim_param("batch");
  for (int64_t d : sample) shape->add_dim()->set_dim_value(d);
}

std::vector<int64_t> pads_of(int64_t pad_h, int64_t pad_w) { return {pad_h, pad_w, pad_h, pad_w}; }  // [t, l, b, r]

}  // namespace

std::string export_onnx(Model& model, const std::map<std::string, std::string>& metadata) {
  const std::vector<Model::GraphNode> nodes = model.graph_nodes();
  std::map<std::string, Tensor> state;
  for (NamedTensor& t : model.state()) {
    if (!t.tensor.device().is_cpu()) throw InternalError("export: model '" + model.name() + "' is not on the CPU");
    state[t.name] = t.tensor;
  }

  onnx::ModelProto proto;
  proto.set_ir_version(8);  // the IR of opset 17 (ONNX 1.12)
  proto.set_producer_name("convoy");
  proto.set_producer_version(CONVOY_VERSION);
  auto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpset);
  for (const auto& [key, value] : metadata) {
    auto* prop = proto.add_metadata_props();
    prop->set_key(key);
    prop->set_value(value);
  }
  onnx::GraphProto& graph = *proto.mutable_graph();
  graph.set_name(model.name());
  value_info(*graph.add_input(), "input", model.input_shape());
  GraphWriter g(graph);

  auto add_weights = [&](const std::string& layer, std::vector<std::string>& inputs,
                         std::initializer_list<const char*> names) {
    for (const char* n : names) {
      const std::string full = layer + "." + n;
      if (auto it = state.find(full); it != state.end()) {
        g.initializer(full, it->second);
        inputs.push_back(full);
      }
    }
  };
  auto name_of = [&](int node) { return node < 0 ? std::string("input") : nodes[node].layer->name(); };
  auto shape_of = [&](int node) { return node < 0 ? model.input_shape() : nodes[node].shape; };  // per sample
  bool uses_gelu = false, uses_relu6 = false, uses_unsqueeze = false;
  for (const Model::GraphNode& node : nodes) {
    const std::string& name = node.layer->name();
    std::vector<std::string> in;
    for (int src : node.inputs) in.push_back(name_of(src));
    // Every spec type has its case: a new layer type does not compile until it has an export.
    std::visit(
        Overloaded{
            [&](const Conv2dSpec& s) {
              add_weights(name, in, {"weight", "bias"});
              NodeProto& n = g.node("Conv", name, in, name);
              const Conv2dParams& p = s.params;
              set_ints(n, "kernel_shape", {s.kernel_h, s.kernel_w});
              set_ints(n, "strides", {p.stride_h, p.stride_w});
              set_ints(n, "pads", pads_of(p.pad_h, p.pad_w));
              set_ints(n, "dilations", {p.dilation_h, p.dilation_w});
              set_int(n, "group", p.groups);
            },
            [&](const BatchNormSpec& s) {
              add_weights(name, in, {"weight", "bias", "running_mean", "running_var"});
              set_float(g.node("BatchNormalization", name, in, name), "epsilon", s.eps);
            },
            [&](const ActivationSpec& s) {
              switch (s.kind) {
                case Activation::relu: g.node("Relu", name, in, name); break;
                case Activation::leaky_relu:
                  set_float(g.node("LeakyRelu", name, in, name), "alpha", s.negative_slope);
                  break;
                case Activation::gelu:  // x * 0.5 * (1 + erf(x / sqrt(2)))
                  uses_gelu = true;
                  g.node("Div", name + "/div", {in[0], "gelu/sqrt2"}, name + "/div");
                  g.node("Erf", name + "/erf", {name + "/div"}, name + "/erf");
                  g.node("Add", name + "/add", {name + "/erf", "gelu/one"}, name + "/add");
                  g.node("Mul", name + "/mul", {in[0], name + "/add"}, name + "/mul");
                  g.node("Mul", name, {name + "/mul", "gelu/half"}, name);
                  break;
                case Activation::sigmoid: g.node("Sigmoid", name, in, name); break;
                case Activation::silu:  // x * sigmoid(x), as torch.onnx writes SiLU
                  g.node("Sigmoid", name + "/sigmoid", in, name + "/sigmoid");
                  g.node("Mul", name, {in[0], name + "/sigmoid"}, name);
                  break;
                case Activation::hardsigmoid: {
                  NodeProto& n = g.node("HardSigmoid", name, in, name);
                  set_float(n, "alpha", kHardSigmoidAlpha);
                  set_float(n, "beta", kHardSigmoidBeta);
                  break;
                }
                case Activation::hardswish: g.node("HardSwish", name, in, name); break;  // opset 14
                case Activation::relu6:  // Clip's bounds are inputs from opset 11
                  uses_relu6 = true;
                  g.node("Clip", name, {in[0], "relu6/min", "relu6/max"}, name);
                  break;
              }
            },
            [&](const Pool2dSpec& s) {
              const Pool2dParams& p = s.params;
              NodeProto& n = g.node(p.kind == PoolKind::max ? "MaxPool" : "AveragePool", name, in, name);
              set_ints(n, "kernel_shape", {p.kernel_h, p.kernel_w});
              set_ints(n, "strides", {p.stride_h, p.stride_w});
              set_ints(n, "pads", pads_of(p.pad_h, p.pad_w));
              if (p.kind == PoolKind::avg) set_int(n, "count_include_pad", 0);  // Convoy's (and the default)
            },
            [&](const GlobalPoolSpec& s) {
              g.node(s.kind == PoolKind::max ? "GlobalMaxPool" : "GlobalAveragePool", name, in, name);
            },
            [&](const FlattenSpec&) { set_int(g.node("Flatten", name, in, name), "axis", 1); },
            [&](const LinearSpec&) {
              // Convoy's linear reads a pooled (C, 1, 1) as C features; Gemm wants (N, F).
              if (shape_of(node.inputs[0]).size() != 1) {
                set_int(g.node("Flatten", name + "/flatten", in, name + "/flatten"), "axis", 1);
                in = {name + "/flatten"};
              }
              add_weights(name, in, {"weight", "bias"});
              set_int(g.node("Gemm", name, in, name), "transB", 1);
            },
            [&](const DropoutSpec&) { g.node("Dropout", name, in, name); },  // no training_mode input: the identity
            [&](const AddSpec&) {
              std::string sum = in[0];
              for (size_t k = 1; k < in.size(); ++k) {
                const std::string out = k + 1 == in.size() ? name : name + "/" + std::to_string(k);
                g.node("Add", out, {sum, in[k]}, out);
                sum = out;
              }
            },
            [&](const ConcatSpec&) { set_int(g.node("Concat", name, in, name), "axis", 1); },
            [&](const MulSpec&) {
              // ONNX broadcasts from the last dimension: a (N, C) factor becomes (N, C, 1, 1) first.
              for (size_t k = 0; k < 2; ++k)
                if (shape_of(node.inputs[k]).size() == 1) {
                  uses_unsqueeze = true;
                  g.node("Unsqueeze", name + "/unsqueeze", {in[k], "mul/axes"}, name + "/unsqueeze");
                  in[k] = name + "/unsqueeze";
                }
              g.node("Mul", name, in, name);
            },
            [&](const SoftmaxSpec&) { set_int(g.node("Softmax", name, in, name), "axis", 1); },  // opset 13's: one axis
            [&](const UpsampleSpec& s) {
              // As torch.onnx writes nn.Upsample and F.interpolate: constant scales for a factor,
              // sizes of (N, C) from the input's shape and a fixed (H, W) for a size (constant
              // sizes would fix the batch).
              std::vector<std::string> inputs{in[0], ""};
              if (s.scale_h > 0) {
                inputs.push_back(name + "/scales");
                g.floats(inputs.back(), {1.0f, 1.0f, static_cast<float>(s.scale_h), static_cast<float>(s.scale_w)});
              } else {
                g.node("Shape", name + "/shape", {in[0]}, name + "/shape");
                g.ints(name + "/zero", {0});
                g.ints(name + "/two", {2});
                g.ints(name + "/hw", {s.size_h, s.size_w});
                g.node("Slice", name + "/nc", {name + "/shape", name + "/zero", name + "/two", name + "/zero"},
                       name + "/nc");
                set_int(g.node("Concat", name + "/sizes", {name + "/nc", name + "/hw"}, name + "/sizes"), "axis", 0);
                inputs.insert(inputs.end(), {"", name + "/sizes"});
              }
              NodeProto& n = g.node("Resize", name, inputs, name);
              if (s.mode == UpsampleMode::nearest) {  // as torch.onnx writes F.interpolate's nearest
                set_string(n, "mode", "nearest");
                set_string(n, "coordinate_transformation_mode", "asymmetric");
                set_string(n, "nearest_mode", "floor");
              } else {
                // half_pixel is PyTorch's align_corners=False arithmetic at every size (pytorch_half_pixel
                // differs where an output axis has one element); torch.onnx 1.13 writes it too.
                set_string(n, "mode", "linear");
                set_string(n, "coordinate_transformation_mode", "half_pixel");
              }
            }},
        node.layer->spec());
  }
  if (uses_gelu) {
    g.scalar("gelu/sqrt2", static_cast<float>(std::sqrt(2.0)));
    g.scalar("gelu/one", 1.0f);
    g.scalar("gelu/half", 0.5f);
  }
  if (uses_unsqueeze) g.ints("mul/axes", {2, 3});
  if (uses_relu6) {
    g.scalar("relu6/min", 0.0f);
    g.scalar("relu6/max", static_cast<float>(kRelu6Max));
  }
  const bool has_logits =
      std::any_of(nodes.begin(), nodes.end(), [](const Model::GraphNode& n) { return n.layer->name() == "logits"; });
  if (has_logits && model.output_layer() != "logits")
    throw InputError("export: model '" + model.name() + "' has a layer named 'logits' that is not its output; "
                     "the ONNX output takes that name (rename the layer)");
  if (model.output_layer() != "logits") g.node("Identity", "logits", {model.output_layer()}, "logits");
  value_info(*graph.add_output(), "logits", model.output_shape());
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) throw InternalError("export: serializing the ONNX model failed");
  return bytes;
}

}  // namespace convoy
