// ONNX import: one node, one layer (convert), the model YAML (run), and reading constants. What
// takes several nodes or none is in onnx_import_patterns.cpp.
#include "engine/interchange/onnx_import.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "engine/interchange/onnx_importer.h"
#include "engine/layers/layer_spec.h"

namespace convoy::onnx_import {

namespace {

constexpr const char* kSupportedOps =
    "Conv, BatchNormalization, Relu, LeakyRelu, Gelu, Sigmoid (x * Sigmoid(x): SiLU), HardSigmoid, HardSwish, "
    "Clip (0, 6: ReLU6), MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, ReduceMean (over H and W), Gemm, "
    "MatMul, Flatten, Reshape (to (N, -1)), Add, Concat, Mul (x by one number per channel: squeeze-and-excitation), "
    "Dropout, Identity, Pad (of zeros), Softmax, Resize and Upsample (nearest, and linear as PyTorch's bilinear)";

}  // namespace

std::string ints_yaml(const std::vector<int64_t>& v) {
  if (v.size() == 2 && v[0] == v[1]) return std::to_string(v[0]);
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string number_yaml(double v) {
  std::ostringstream out;
  out.precision(9);
  out << v;
  return out.str();
}

namespace {

// A name as a YAML scalar: plain where it is safe, else single-quoted.
std::string name_yaml(const std::string& name) {
  bool plain = !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_');
  for (char c : name) plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-');
  if (plain && name != "true" && name != "false" && name != "null" && name != "yes" && name != "no") return name;
  std::string out = "'";
  for (char c : name) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

}  // namespace

Tensor Importer::constant(const NodeProto& node, const std::string& value) const {
  auto it = constants_.find(value);
  if (it == constants_.end()) fail_node(node, "input '" + value + "' must be a constant (an initializer)");
  const TensorProto& t = *it->second;
  if (t.data_type() != TensorProto::FLOAT)
    fail_node(node, "constant '" + value + "' has ONNX data type " + std::to_string(t.data_type()) + ", expected float");
  if (t.has_data_location() && t.data_location() == TensorProto::EXTERNAL)
    fail_node(node, "constant '" + value + "' is stored in an external file, which the import does not read");
  Shape shape(t.dims().begin(), t.dims().end());
  // The data's size bounds the shape before anything is allocated (the file may be hostile).
  const size_t held = t.raw_data().empty() ? static_cast<size_t>(t.float_data_size()) : t.raw_data().size() / sizeof(float);
  size_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > held / static_cast<size_t>(d) + 1))
      fail_node(node, "constant '" + value + "' has dimensions " + shape_str(shape) + " its data does not hold");
    n *= static_cast<size_t>(d);
  }
  if (n != held)
    fail_node(node, "constant '" + value + "' holds " + std::to_string(held) + " floats for " + shape_str(shape));
  Tensor out = Tensor::empty(shape);
  if (!t.raw_data().empty()) {
    if (t.raw_data().size() != n * sizeof(float))
      fail_node(node, "constant '" + value + "' holds " + std::to_string(t.raw_data().size()) + " bytes for " +
                          shape_str(shape) + " floats");
    std::memcpy(out.raw(), t.raw_data().data(), n * sizeof(float));
  } else {
    if (static_cast<size_t>(t.float_data_size()) != n)
      fail_node(node, "constant '" + value + "' holds " + std::to_string(t.float_data_size()) + " floats for " +
                          shape_str(shape));
    std::copy(t.float_data().begin(), t.float_data().end(), out.data<float>());
  }
  return out;
}

double Importer::scalar(const NodeProto& node, const std::string& value) const {
  const Tensor t = constant(node, value);
  if (t.numel() != 1) fail_node(node, "input '" + value + "' must be one number, it is " + shape_str(t.shape()));
  return t.data<float>()[0];
}

bool Importer::is_int_constant(const std::string& value) const {
  auto it = constants_.find(value);
  return it != constants_.end() &&
         (it->second->data_type() == TensorProto::INT64 || it->second->data_type() == TensorProto::INT32);
}

std::vector<int64_t> Importer::int_constant(const NodeProto& node, const std::string& value) const {
  auto it = constants_.find(value);
  if (it == constants_.end()) fail_node(node, "input '" + value + "' must be a constant (an initializer)");
  const TensorProto& t = *it->second;
  const bool i64 = t.data_type() == TensorProto::INT64;
  if (!i64 && t.data_type() != TensorProto::INT32)
    fail_node(node, "constant '" + value + "' has ONNX data type " + std::to_string(t.data_type()) + ", expected int64");
  std::vector<int64_t> out;
  if (!t.raw_data().empty()) {
    const size_t width = i64 ? sizeof(int64_t) : sizeof(int32_t);
    if (t.raw_data().size() % width != 0 || t.raw_data().size() / width > 64)
      fail_node(node, "constant '" + value + "' holds " + std::to_string(t.raw_data().size()) + " bytes, not a few integers");
    for (size_t i = 0; i < t.raw_data().size(); i += width) {
      if (i64) {
        int64_t v = 0;
        std::memcpy(&v, t.raw_data().data() + i, width);
        out.push_back(v);
      } else {
        int32_t v = 0;
        std::memcpy(&v, t.raw_data().data() + i, width);
        out.push_back(v);
      }
    }
  } else if (i64) {
    out.assign(t.int64_data().begin(), t.int64_data().end());
  } else {
    out.assign(t.int32_data().begin(), t.int32_data().end());
  }
  return out;
}

namespace {

// torch.onnx's node names are module scopes, "/layer2/layer2.0/downsample/downsample.0/Conv": the
// module path layer2.0.downsample.0, as in its state dict. Functional ops get their op's name
// after the path ("/layer1/layer1.0/Add" -> layer1.0.add). Empty when the name is not of that form.
std::string torch_module_path(const std::string& node_name) {
  if (node_name.size() < 2 || node_name[0] != '/') return "";
  std::vector<std::string> parts;
  std::stringstream in(node_name.substr(1));
  for (std::string part; std::getline(in, part, '/');) parts.push_back(part);
  if (parts.empty()) return "";
  std::string op = parts.back();
  parts.pop_back();
  std::string path, previous;
  for (const std::string& part : parts) {
    // A child's scope repeats its parent's ("layer2" then "layer2.0"): keep what it adds.
    const bool nested = !previous.empty() && part.rfind(previous + ".", 0) == 0;
    const std::string add = nested ? part.substr(previous.size() + 1) : part;
    path += (path.empty() ? "" : ".") + add;
    previous = part;
  }
  for (char& c : op) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::set<std::string> functional = {"add", "concat", "flatten", "identity", "matmul", "dropout"};
  const std::string base = op.substr(0, op.find('_'));
  if (path.empty() || functional.count(base)) return path.empty() ? op : path + "." + op;
  return path;
}

}  // namespace

// Torch's parameter names make the best layer names (layer1.0.conv1.weight -> layer1.0.conv1);
// then torch.onnx's module scope, the node's name, its op and position; made valid and unique.
std::string Importer::unique_name(const NodeProto& node, const std::string& weight_value) {
  std::string name;
  const std::string tail = ".weight";
  if (weight_value.size() > tail.size() && weight_value.compare(weight_value.size() - tail.size(), tail.size(), tail) == 0)
    name = weight_value.substr(0, weight_value.size() - tail.size());
  if (name.empty()) name = torch_module_path(node.name());
  if (name.empty()) name = node.name();
  if (name.empty()) name = node.op_type() + std::to_string(layers_.size());
  for (char& c : name)
    if (static_cast<unsigned char>(c) <= ' ' || c == ',' || c == 0x7f) c = '_';
  std::string cleaned;  // no empty parts between dots
  for (char c : name) {
    if (c == '.' && (cleaned.empty() || cleaned.back() == '.')) continue;
    cleaned += c;
  }
  while (!cleaned.empty() && cleaned.back() == '.') cleaned.pop_back();
  if (cleaned.empty() || cleaned == "logits") cleaned = node.op_type() + std::to_string(layers_.size());
  std::string unique = cleaned;
  for (int k = 1; taken_.count(unique); ++k) unique = cleaned + "_" + std::to_string(k);
  taken_.insert(unique);
  return unique;
}

// Convolution and pooling windows: strides, symmetric pads, dilations.
void Importer::windows(const NodeProto& node, YamlLayer& layer, const std::vector<int64_t>& kernel, bool pool) {
  const std::string auto_pad = attr(node, "auto_pad") ? attr(node, "auto_pad")->s() : "NOTSET";
  if (auto_pad != "NOTSET" && auto_pad != "VALID")
    fail_node(node, "auto_pad " + auto_pad + " is not supported (give explicit pads)");
  const auto pads = attr_ints(node, "pads", {0, 0, 0, 0});
  if (pads.size() != 4) fail_node(node, "only 2-d windows are supported (pads has " + std::to_string(pads.size()) + " values)");
  if (pads[0] != pads[2] || pads[1] != pads[3])
    fail_node(node, "asymmetric pads [" + ints_yaml(pads) + "] are not supported");
  const auto strides = attr_ints(node, "strides", {1, 1});  // ONNX's defaults
  const auto dilations = attr_ints(node, "dilations", {1, 1});
  const Conv2dParams convoy;  // Convoy's defaults, left out of the YAML
  if (strides.size() != 2 || dilations.size() != 2) fail_node(node, "only 2-d windows are supported");
  layer.attrs.push_back({"kernel", ints_yaml(kernel)});
  layer.attrs.push_back({"stride", ints_yaml(strides)});
  if (pads[0] != convoy.pad_h || pads[1] != convoy.pad_w)
    layer.attrs.push_back({"padding", ints_yaml({pads[0], pads[1]})});
  if (pool) {
    if (dilations != std::vector<int64_t>{1, 1}) fail_node(node, "dilated pooling is not supported");
    if (attr_int(node, "ceil_mode", 0) != 0) ceil_pools_.push_back({layer.name, &node});  // checked on the built model
  } else if (dilations != std::vector<int64_t>{convoy.dilation_h, convoy.dilation_w}) {
    layer.attrs.push_back({"dilation", ints_yaml(dilations)});
  }
}

void Importer::convert(const NodeProto& node) {
  const std::string& op = node.op_type();
  if (!node.domain().empty() && node.domain() != "ai.onnx") fail_node(node, "domain '" + node.domain() + "' is not supported");
  if (node.input_size() == 0 || node.output_size() == 0) fail_node(node, "expected inputs and an output");
  if (op == "Identity") {
    // torch.onnx shares equal weights through Identity nodes of one initializer: a constant too.
    if (is_constant(node.input(0))) constants_[node.output(0)] = constants_.at(node.input(0));
    else layer_of_[node.output(0)] = layer_of(node, node.input(0));
    return;
  }
  if (convert_shape_arithmetic(node) || convert_pad(node) || convert_reduce_mean(node) || convert_activation(node) ||
      convert_resize(node) || convert_softmax(node))
    return;
  if (op == "Unsqueeze") {
    // convoy export's (N, C) -> (N, C, 1, 1) before a Mul's broadcast: the mul layer takes (N, C) as it is.
    const std::vector<int64_t> axes =
        node.input_size() > 1 ? int_constant(node, node.input(1)) : attr_ints(node, "axes", {});
    const auto& readers = consumers_[node.output(0)];
    if (axes != std::vector<int64_t>{2, 3} || readers.empty() ||
        !std::all_of(readers.begin(), readers.end(), [](const NodeProto* r) { return r->op_type() == "Mul"; }))
      fail_node(node, "only (N, C) unsqueezed to (N, C, 1, 1) for a Mul is supported");
    layer_of_[node.output(0)] = layer_of(node, node.input(0));
    return;
  }
  YamlLayer layer;
  auto from = [&](int i) { layer.inputs.push_back(layer_of(node, node.input(i))); };
  auto weight = [&](const std::string& key, const std::string& value) { tensors_.push_back({layer.name + "." + key, constant(node, value)}); };
  if (op == "Conv") {
    if (node.input_size() < 2) fail_node(node, "expected a weight input");
    const Tensor w = constant(node, node.input(1));  // (K, C/groups, R, S)
    if (w.ndim() != 4) fail_node(node, "only 2-d convolutions are supported (weight " + shape_str(w.shape()) + ")");
    layer.name = unique_name(node, node.input(1));
    layer.type = Conv2dSpec::type();
    from(0);
    layer.attrs.push_back({"out_channels", std::to_string(w.dim(0))});
    const auto kernel = attr_ints(node, "kernel_shape", {w.dim(2), w.dim(3)});
    if (kernel != std::vector<int64_t>{w.dim(2), w.dim(3)}) fail_node(node, "kernel_shape disagrees with the weight");
    windows(node, layer, kernel, false);
    if (const int64_t groups = attr_int(node, "group", 1); groups != Conv2dParams{}.groups)
      layer.attrs.push_back({"groups", std::to_string(groups)});
    const bool bias = node.input_size() > 2 && !node.input(2).empty();
    if (bias != Conv2dSpec{}.bias) layer.attrs.push_back({"bias", bias ? "true" : "false"});
    tensors_.push_back({layer.name + ".weight", w});
    if (bias) weight("bias", node.input(2));
  } else if (op == "BatchNormalization") {
    if (node.input_size() != 5) fail_node(node, "expected X, scale, B, mean and var");
    if (attr_int(node, "training_mode", 0) != 0) fail_node(node, "training_mode 1 is not supported (export in eval mode)");
    layer.name = unique_name(node, node.input(1));
    layer.type = BatchNormSpec::type();
    from(0);
    const double eps = attr_float(node, "epsilon", BatchNormSpec::kEps);
    if (std::abs(eps - BatchNormSpec::kEps) > 1e-12)
      layer.attrs.push_back({"eps", number_yaml(eps)});
    weight("weight", node.input(1));
    weight("bias", node.input(2));
    weight("running_mean", node.input(3));
    weight("running_var", node.input(4));
  } else if (op == "Relu" || op == "LeakyRelu" || op == "Gelu" || op == "GlobalAveragePool" || op == "GlobalMaxPool" ||
             op == "Flatten" || op == "Dropout") {
    layer.name = unique_name(node, "");
    from(0);
    if (op == "Relu") layer.type = ActivationSpec{.kind = Activation::relu}.type();
    if (op == "LeakyRelu") {
      layer.type = ActivationSpec{.kind = Activation::leaky_relu}.type();
      layer.attrs.push_back({"negative_slope", number_yaml(attr_float(node, "alpha", ActivationSpec::kNegativeSlope))});
    }
    if (op == "Gelu") {
      layer.type = ActivationSpec{.kind = Activation::gelu}.type();
      if (attr(node, "approximate") && attr(node, "approximate")->s() != "none")
        fail_node(node, "approximate '" + attr(node, "approximate")->s() + "' is not supported (Convoy's gelu is erf's)");
    }
    if (op == "GlobalAveragePool") layer.type = GlobalPoolSpec{.kind = PoolKind::avg}.type();
    if (op == "GlobalMaxPool") layer.type = GlobalPoolSpec{.kind = PoolKind::max}.type();
    if (op == "Flatten") {
      layer.type = FlattenSpec::type();
      if (attr_int(node, "axis", 1) != 1) fail_node(node, "only axis 1 is supported");
    }
    if (op == "Dropout") {
      layer.type = DropoutSpec::type();
      if (node.input_size() > 1 && !node.input(1).empty()) {
        const Tensor ratio = constant(node, node.input(1));
        if (ratio.numel() != 1) fail_node(node, "ratio must be a scalar");
        layer.attrs.push_back({"p", number_yaml(ratio.data<float>()[0])});
      }
    }
  } else if (op == "MaxPool" || op == "AveragePool") {
    layer.name = unique_name(node, "");
    layer.type = Pool2dSpec{.params = {.kind = op == "MaxPool" ? PoolKind::max : PoolKind::avg}}.type();
    from(0);
    if (node.output_size() > 1 && !node.output(1).empty()) fail_node(node, "the Indices output is not supported");
    const auto kernel = attr_ints(node, "kernel_shape", {});
    if (kernel.size() != 2) fail_node(node, "expected a 2-d kernel_shape");
    windows(node, layer, kernel, true);
    const auto pads = attr_ints(node, "pads", {0, 0, 0, 0});
    if (op == "AveragePool" && attr_int(node, "count_include_pad", 0) != 0 && (pads[0] || pads[1]))
      fail_node(node, "count_include_pad 1 with padding is not supported (Convoy averages over the real elements)");
  } else if (op == "Gemm" || op == "MatMul") {
    if (node.input_size() < 2) fail_node(node, "expected two inputs");
    Tensor b = constant(node, node.input(1));
    if (b.ndim() != 2) fail_node(node, "the weight must be 2-d, got " + shape_str(b.shape()));
    const bool trans_b = op == "Gemm" && attr_int(node, "transB", 0) != 0;
    if (op == "Gemm" && (attr_int(node, "transA", 0) != 0 || attr_float(node, "alpha", 1) != 1.0f ||
                         attr_float(node, "beta", 1) != 1.0f))
      fail_node(node, "only transA 0, alpha 1 and beta 1 are supported");
    if (!trans_b) {  // (in, out) -> (out, in)
      Tensor t = Tensor::empty({b.dim(1), b.dim(0)});
      for (int64_t i = 0; i < b.dim(0); ++i)
        for (int64_t j = 0; j < b.dim(1); ++j) t.data<float>()[j * b.dim(0) + i] = b.data<float>()[i * b.dim(1) + j];
      b = t;
    }
    layer.name = unique_name(node, node.input(1));
    layer.type = LinearSpec::type();
    from(0);
    layer.attrs.push_back({"out_features", std::to_string(b.dim(0))});
    tensors_.push_back({layer.name + ".weight", b});
    const bool bias = op == "Gemm" && node.input_size() > 2 && !node.input(2).empty();
    if (bias) {
      Tensor c = constant(node, node.input(2));
      if (c.numel() != b.dim(0)) fail_node(node, "the bias C must hold one value per output, got " + shape_str(c.shape()));
      tensors_.push_back({layer.name + ".bias", c.reshape({b.dim(0)})});
    } else {
      layer.attrs.push_back({"bias", "false"});  // LinearSpec's default is true
      bias_free_linear_.insert(layer.name);
    }
  } else if (op == "Add" || op == "Concat") {
    if (op == "Add" && node.input_size() == 2 && (is_constant(node.input(0)) || is_constant(node.input(1)))) {
      // MatMul + Add of a bias vector: the linear layer's bias.
      const int ci = is_constant(node.input(0)) ? 0 : 1;
      const std::string& target = layer_of(node, node.input(1 - ci));
      if (!bias_free_linear_.count(target)) fail_node(node, "adding a constant is supported only as a MatMul's bias");
      for (YamlLayer& l : layers_)
        if (l.name == target) std::erase(l.attrs, std::pair<std::string, std::string>{"bias", "false"});
      Tensor c = constant(node, node.input(ci));
      tensors_.push_back({target + ".bias", c.reshape({c.numel()})});
      bias_free_linear_.erase(target);
      layer_of_[node.output(0)] = target;
      return;
    }
    if (op == "Concat" && node.input_size() == 1) {  // torch.cat([x]) (DenseNet's first layers): x itself
      layer_of_[node.output(0)] = layer_of(node, node.input(0));
      return;
    }
    layer.name = unique_name(node, "");
    layer.type = op == "Add" ? AddSpec::type() : ConcatSpec::type();
    for (int i = 0; i < node.input_size(); ++i) from(i);
    if (op == "Concat" && attr_int(node, "axis", 1) != 1 && attr_int(node, "axis", 1) != -3)
      fail_node(node, "only axis 1 (channels) is supported");
  } else if (op == "Mul") {
    // SiLU's Mul was taken with its Sigmoid; what is left is squeeze-and-excitation's x * s,
    // whose shapes the mul layer checks when the model is built.
    if (node.input_size() != 2 || is_constant(node.input(0)) || is_constant(node.input(1)))
      fail_node(node, "only a product of two tensors is supported (squeeze-and-excitation's x * s), not by a constant");
    layer.name = unique_name(node, "");
    layer.type = MulSpec::type();
    from(0);
    from(1);
  } else {
    fail_node(node, "this op is not supported (Convoy imports " + std::string(kSupportedOps) + ")");
  }
  add_layer(node, std::move(layer));
}

bool Importer::scalar_is(const std::string& value, double expected) const {
  auto it = constants_.find(value);
  if (it == constants_.end() || it->second->data_type() != TensorProto::FLOAT) return false;
  const TensorProto& t = *it->second;
  float v = 0;
  if (t.raw_data().size() == sizeof v) std::memcpy(&v, t.raw_data().data(), sizeof v);
  else if (t.raw_data().empty() && t.float_data_size() == 1) v = t.float_data(0);
  else return false;
  return std::abs(v - expected) <= 1e-6 * std::abs(expected);
}

ImportedModel Importer::run(const std::string& fallback_name) {
  const onnx::GraphProto& graph = proto_.graph();
  for (const TensorProto& t : graph.initializer()) constants_[t.name()] = &t;
  for (const NodeProto& node : graph.node())
    if (node.op_type() == "Constant" && node.output_size() == 1 && attr(node, "value") && attr(node, "value")->has_t())
      constants_[node.output(0)] = &attr(node, "value")->t();
  const onnx::ValueInfoProto* input = nullptr;
  for (const onnx::ValueInfoProto& v : graph.input())
    if (!constants_.count(v.name())) {
      if (input) fail("the graph has more than one input ('" + input->name() + "', '" + v.name() + "'); Convoy models take one image batch");
      input = &v;
    }
  if (!input) fail("the graph has no input");
  const auto& dims = input->type().tensor_type().shape().dim();
  if (dims.size() != 4) fail("input '" + input->name() + "' must be (N, C, H, W), it has " + std::to_string(dims.size()) + " dimensions");
  if (dims[0].has_dim_value()) input_batch_ = dims[0].dim_value();
  Shape sample;
  for (int i = 1; i < 4; ++i) {
    if (!dims[i].has_dim_value() || dims[i].dim_value() <= 0)
      fail("input '" + input->name() + "': dimension " + std::to_string(i) + " must be a fixed size");
    sample.push_back(dims[i].dim_value());
  }
  if (graph.output_size() != 1) fail("the graph must have one output (the logits), it has " + std::to_string(graph.output_size()));
  layer_of_[input->name()] = "input";
  std::vector<const NodeProto*> nodes;  // Constant nodes are values, read where used
  for (const NodeProto& node : graph.node())
    if (node.op_type() != "Constant") nodes.push_back(&node);
  for (const NodeProto* node : nodes)
    for (const std::string& in : node->input()) consumers_[in].push_back(node);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (absorbed_.count(nodes[i])) continue;
    if (const size_t n = gelu_formula_at(nodes, i)) {
      i += n - 1;
      continue;
    }
    convert(*nodes[i]);
  }
  auto out = layer_of_.find(graph.output(0).name());
  if (out == layer_of_.end() || out->second == "input") fail("the output '" + graph.output(0).name() + "' is not a layer's");
  if (layers_.empty()) fail("the graph has no layers");

  ImportedModel result;
  for (const auto& p : proto_.metadata_props()) result.metadata[p.key()] = p.value();
  std::ostringstream yaml;
  yaml << "# Imported from " << source_ << " (producer " << (proto_.producer_name().empty() ? "unknown" : proto_.producer_name())
       << " " << proto_.producer_version() << ") by convoy import.\n";
  yaml << "name: " << name_yaml(graph.name().empty() ? fallback_name : graph.name()) << "\n";
  yaml << "input: [" << sample[0] << ", " << sample[1] << ", " << sample[2] << "]\n";
  if (out->second != layers_.back().name) yaml << "output: " << name_yaml(out->second) << "\n";
  yaml << "layers:\n";
  std::string previous = "input";
  for (const YamlLayer& l : layers_) {
    yaml << "  - {name: " << name_yaml(l.name) << ", type: " << l.type;
    for (const auto& [k, v] : l.attrs) yaml << ", " << k << ": " << v;
    if (l.inputs != std::vector<std::string>{previous}) {
      yaml << ", inputs: [";
      for (size_t i = 0; i < l.inputs.size(); ++i) yaml << (i ? ", " : "") << name_yaml(l.inputs[i]);
      yaml << "]";
    }
    yaml << "}\n";
    previous = l.name;
  }
  result.yaml = yaml.str();
  check_ceil_mode(result.yaml);
  check_on_built_model(result.yaml);
  result.tensors = std::move(tensors_);
  return result;
}

}  // namespace convoy::onnx_import

namespace convoy {

ImportedModel import_onnx(const std::filesystem::path& path, const std::string& name) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": cannot open the ONNX file");
  onnx::ModelProto proto;
  if (!proto.ParseFromIstream(&in)) throw InputError(path.string() + ": not an ONNX model (the protobuf does not parse)");
  for (const auto& opset : proto.opset_import())
    if ((opset.domain().empty() || opset.domain() == "ai.onnx") && (opset.version() < 7 || opset.version() > 21))
      throw InputError(path.string() + ": opset " + std::to_string(opset.version()) + " is not supported (7 ... 21)");
  return onnx_import::Importer(proto, path.string()).run(name);
}

}  // namespace convoy
