#include "engine/interchange/onnx_export.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <set>

#include "engine/config/yaml_map.h"
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

std::vector<int64_t> pads_of(const std::vector<int64_t>& padding) {  // [top, left, bottom, right]
  return {padding[0], padding[1], padding[0], padding[1]};
}

}  // namespace

std::string export_onnx(Model& model, const std::map<std::string, std::string>& metadata) {
  const std::string source = model.name() + " (model_yaml)";
  const YAML::Node layers = yaml_load_string(model.yaml(), source)["layers"];
  const std::vector<LayerInfo> infos = model.layer_infos();
  if (!layers.IsSequence() || layers.size() != infos.size())
    throw InternalError("export: the model's YAML does not list its " + std::to_string(infos.size()) + " layers");
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
  std::map<std::string, Shape> shapes = {{"input", model.input_shape()}};  // per sample
  for (const LayerInfo& info : infos) shapes[info.name] = info.output;
  std::set<std::string> uses_gelu;
  for (size_t i = 0; i < infos.size(); ++i) {
    const LayerInfo& info = infos[i];
    const YamlMap attrs(layers[i], source, "layers[" + std::to_string(i) + "]");
    const std::string& name = info.name;
    std::vector<std::string> in = info.inputs;
    const std::string& type = info.type;
    if (type == "conv2d") {
      add_weights(name, in, {"weight", "bias"});
      NodeProto& n = g.node("Conv", name, in, name);
      set_ints(n, "kernel_shape", attrs.get_ints("kernel", 2, {}));
      set_ints(n, "strides", attrs.get_ints("stride", 2, {1, 1}));
      set_ints(n, "pads", pads_of(attrs.get_ints("padding", 2, {0, 0})));
      set_ints(n, "dilations", attrs.get_ints("dilation", 2, {1, 1}));
      set_int(n, "group", attrs.get_int("groups", 1));
    } else if (type == "batchnorm2d") {
      add_weights(name, in, {"weight", "bias", "running_mean", "running_var"});
      NodeProto& n = g.node("BatchNormalization", name, in, name);
      set_float(n, "epsilon", attrs.get_double("eps", 1e-5));
    } else if (type == "relu") {
      g.node("Relu", name, in, name);
    } else if (type == "leaky_relu") {
      set_float(g.node("LeakyRelu", name, in, name), "alpha", attrs.get_double("negative_slope", 0.01));
    } else if (type == "gelu") {  // x * 0.5 * (1 + erf(x / sqrt(2)))
      uses_gelu.insert(name);
      g.node("Div", name + "/div", {in[0], "gelu/sqrt2"}, name + "/div");
      g.node("Erf", name + "/erf", {name + "/div"}, name + "/erf");
      g.node("Add", name + "/add", {name + "/erf", "gelu/one"}, name + "/add");
      g.node("Mul", name + "/mul", {in[0], name + "/add"}, name + "/mul");
      g.node("Mul", name, {name + "/mul", "gelu/half"}, name);
    } else if (type == "maxpool2d" || type == "avgpool2d") {
      const auto kernel = attrs.get_ints("kernel", 2, {});
      NodeProto& n = g.node(type == "maxpool2d" ? "MaxPool" : "AveragePool", name, in, name);
      set_ints(n, "kernel_shape", kernel);
      set_ints(n, "strides", attrs.get_ints("stride", 2, kernel));
      set_ints(n, "pads", pads_of(attrs.get_ints("padding", 2, {0, 0})));
      if (type == "avgpool2d") set_int(n, "count_include_pad", 0);  // Convoy's (and the default)
    } else if (type == "global_avg_pool") {
      g.node("GlobalAveragePool", name, in, name);
    } else if (type == "global_max_pool") {
      g.node("GlobalMaxPool", name, in, name);
    } else if (type == "flatten") {
      set_int(g.node("Flatten", name, in, name), "axis", 1);
    } else if (type == "linear") {
      // Convoy's linear reads a pooled (C, 1, 1) as C features; Gemm wants (N, F).
      if (shapes.at(in[0]).size() != 1) {
        set_int(g.node("Flatten", name + "/flatten", in, name + "/flatten"), "axis", 1);
        in = {name + "/flatten"};
      }
      add_weights(name, in, {"weight", "bias"});
      set_int(g.node("Gemm", name, in, name), "transB", 1);
    } else if (type == "dropout") {
      g.node("Dropout", name, in, name);  // no training_mode input: the identity
    } else if (type == "add") {
      std::string sum = in[0];
      for (size_t k = 1; k < in.size(); ++k) {
        const std::string out = k + 1 == in.size() ? name : name + "/" + std::to_string(k);
        g.node("Add", out, {sum, in[k]}, out);
        sum = out;
      }
    } else if (type == "concat") {
      set_int(g.node("Concat", name, in, name), "axis", 1);
    } else {
      throw InputError("export: layer '" + name + "' of model '" + model.name() + "' has type '" + type +
                       "', which the ONNX export does not know");
    }
  }
  if (!uses_gelu.empty()) {
    g.scalar("gelu/sqrt2", static_cast<float>(std::sqrt(2.0)));
    g.scalar("gelu/one", 1.0f);
    g.scalar("gelu/half", 0.5f);
  }
  if (shapes.count("logits") && model.output_layer() != "logits")
    throw InputError("export: model '" + model.name() + "' has a layer named 'logits' that is not its output; "
                     "the ONNX output takes that name (rename the layer)");
  if (model.output_layer() != "logits") g.node("Identity", "logits", {model.output_layer()}, "logits");
  value_info(*graph.add_output(), "logits", model.output_shape());
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) throw InternalError("export: serializing the ONNX model failed");
  return bytes;
}

}  // namespace convoy
