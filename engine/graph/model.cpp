#include "engine/graph/model.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string_view>
#include <variant>

#include "engine/config/yaml_map.h"
#include "engine/core/error.h"
#include "engine/graph/yaml_layer_attrs.h"
#include "engine/layers/registry.h"

namespace convoy {

Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

std::string Model::read_file(const std::string& path) { return read_yaml_text(path, "the model file"); }

Model Model::from_file(const std::string& path, uint64_t seed) { return from_yaml(read_file(path), path, seed); }

std::string Model::with_classes(const std::string& yaml_text, const std::string& source, int64_t classes) {
  try {
    return with_classes_or_throw(yaml_text, source, classes);
  } catch (const YAML::Exception& e) {  // a layer that is not a mapping, a name that is not a string
    throw InputError(source + ": cannot find the classifier to resize to num_classes: " + e.msg);
  }
}

std::string Model::with_classes_or_throw(const std::string& yaml_text, const std::string& source, int64_t classes) {
  YAML::Node root = yaml_load_string(yaml_text, source);
  YAML::Node layers = root["layers"];
  if (!root.IsMap() || !layers || !layers.IsSequence() || layers.size() == 0)
    throw InputError(source + ": no 'layers' list to find the classifier in");
  YAML::Node classifier = layers[layers.size() - 1];
  if (root["output"]) {
    const auto wanted = root["output"].as<std::string>();
    for (size_t i = 0; i < layers.size(); ++i)
      if (layers[i]["name"] && layers[i]["name"].as<std::string>() == wanted) classifier = layers[i];
  }
  const std::string type = classifier["type"] ? classifier["type"].as<std::string>() : "";
  const LayerSpec* spec = default_spec(type);
  const char* key = !spec                                    ? nullptr
                    : std::holds_alternative<LinearSpec>(*spec) ? "out_features"
                    : std::holds_alternative<Conv2dSpec>(*spec) ? "out_channels" : nullptr;
  if (!key)
    throw InputError(source + ": num_classes needs the output layer to be linear or conv2d, found '" + type + "'");
  classifier[key] = classes;
  if (root["classes"]) root["classes"] = classes;
  YAML::Emitter out;
  out << root;
  return std::string("# ") + source + " with num_classes " + std::to_string(classes) + "\n" + out.c_str() + "\n";
}

namespace {

Shape parse_input_shape(const YamlMap& top) {
  const auto input = top.get_ints("input", 3, {});
  if (input.size() != 3) top.fail("input", "missing (expected [channels, height, width])");
  for (int64_t d : input)
    if (d <= 0) top.fail("input", "dimensions must be positive");
  for (int64_t d : input)
    if (d > kMaxChannels) top.fail("input", "dimensions must be at most " + std::to_string(kMaxChannels));
  Shape shape(input.begin(), input.end());
  if (shape_numel(shape) > kMaxSampleElements)
    top.fail("input", shape_str(shape) + " is more than " + std::to_string(kMaxSampleElements) +
                          " elements per sample");
  return shape;
}

// After a layer's build: its output per sample and the model's weights so far within bounds,
// so that no later layer computes with (or allocates for) absurd sizes.
void check_layer_sizes(Layer& layer, const Shape& out, int64_t& model_parameters) {
  const int64_t elements = shape_numel(out);
  if (elements > kMaxSampleElements)
    layer_error(layer, "output " + shape_str(out) + " is more than " + std::to_string(kMaxSampleElements) +
                           " elements per sample");
  for (Parameter* p : layer.parameters()) model_parameters = saturating_add(model_parameters, p->value.numel());
  if (model_parameters > kMaxModelParameters)
    layer_error(layer, "the model has more than " + std::to_string(kMaxModelParameters) +
                           " parameters by this layer");
}

// Names may be dotted like PyTorch's module paths (layer1.0.downsample.0), so that state-dict
// names "<layer>.<tensor>" are torchvision's. A tensor name splits at its last dot, so dotted
// layer names cannot collide; empty parts ("a..b", ".a", "a.") and blanks would make names
// that PyTorch cannot hold or that read ambiguously in a list, so they are refused.
std::string layer_name_problem(const std::string& name) {
  if (name.empty()) return "is empty";
  for (char c : name)
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f || c == ',')
      return "must not contain blanks, control characters or ','";
  if (name.front() == '.' || name.back() == '.' || name.find("..") != std::string::npos)
    return "has an empty part between dots (expected e.g. layer1.0.conv1)";
  return "";
}

}  // namespace

Shape Model::input_shape_of(const std::string& yaml_text, const std::string& source) {
  const YamlMap top(yaml_load_string(yaml_text, source), source, "");
  return parse_input_shape(top);
}

Model Model::from_yaml(const std::string& yaml_text, const std::string& source, uint64_t seed) {
  Model m;
  m.yaml_ = yaml_text;
  const YamlMap top(yaml_load_string(yaml_text, source), source, "");
  m.name_ = top.get_string("name");
  m.input_shape_ = parse_input_shape(top);
  const int64_t classes = top.get_int("classes", 0);
  const YAML::Node layers = top.raw("layers");
  // (An absent key is an invalid node, whose IsSequence() would throw.)
  if (!layers.IsDefined() || !layers.IsSequence() || layers.size() == 0)
    top.fail("layers", (layers.IsDefined() ? "" : "missing: ") + std::string("expected a non-empty list of layers"));
  const std::string output = top.get_string("output", "");
  top.finish();

  std::map<std::string, int> index_of;
  std::mt19937_64 rng(seed);
  int64_t model_parameters = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string where = "layers[" + std::to_string(i) + "]";
    const YamlMap first(layers[i], source, where);  // checks it is a mapping
    const std::string type = first.get_string("type");
    const std::string name = first.get_string("name", type + std::to_string(i));
    const YamlMap named(layers[i], source, where + " (" + name + ")");
    named.get_string("type");
    named.get_string("name", "");
    if (name == "input" || index_of.count(name)) named.fail("name", "'" + name + "' is already taken");
    if (const std::string bad = layer_name_problem(name); !bad.empty()) named.fail("name", "'" + name + "' " + bad);
    Node node;
    node.layer = make_layer(type, name, YamlLayerAttrs(named));
    const auto sources = named.get_strings("inputs", {i == 0 ? "input" : m.nodes_.back().layer->name()});
    std::vector<Shape> shapes;
    for (const std::string& s : sources) {
      if (s == "input") {
        node.inputs.push_back(-1);
        shapes.push_back(m.input_shape_);
      } else if (auto it = index_of.find(s); it != index_of.end()) {
        node.inputs.push_back(it->second);
        shapes.push_back(m.nodes_[it->second].shape);
      } else {
        named.fail("inputs", "'" + s + "' is not an earlier layer (layers may only read layers above them, or 'input')");
      }
    }
    named.finish();
    try {
      node.shape = node.layer->build(shapes, rng);
      check_layer_sizes(*node.layer, node.shape, model_parameters);
    } catch (const InputError& e) {
      throw InputError(yaml_where(source, layers[i]) + ": " + e.what());
    }
    index_of[name] = static_cast<int>(m.nodes_.size());
    m.nodes_.push_back(std::move(node));
  }
  m.output_node_ = static_cast<int>(m.nodes_.size()) - 1;
  if (!output.empty()) {
    auto it = index_of.find(output);
    if (it == index_of.end()) top.fail("output", "'" + output + "' is not a layer");
    m.output_node_ = it->second;
  }
  m.output_shape_ = m.nodes_[m.output_node_].shape;
  if (m.output_shape_.size() != 1)
    top.fail("output", "the model must end in per-sample class scores (F), but layer '" +
                           m.nodes_[m.output_node_].layer->name() + "' gives " + shape_str(m.output_shape_));
  if (classes && classes != m.output_shape_[0])
    top.fail("classes", std::to_string(classes) + " classes, but the output layer gives " +
                            shape_str(m.output_shape_));
  return m;
}

std::vector<OpKind> Model::unsupported_ops(const Ops& ops, DType compute, Layout layout) const {
  std::set<OpKind> needed = {OpKind::add_inplace, OpKind::cast};  // gradient sums, weight copies
  for (const Node& node : nodes_)
    for (OpKind op : node.layer->ops()) needed.insert(op);
  std::vector<OpKind> missing;
  for (OpKind op : needed)
    if (!ops.supports(op, compute, layout)) missing.push_back(op);
  return missing;
}

void Model::to(Backend& backend, DType compute, Layout layout) {
  ++weights_version_;
  compute_dtype_ = compute;
  layout_ = layout;
  for (Node& node : nodes_) {
    for (Parameter* p : node.layer->parameters()) {
      p->value = backend.upload(p->value);
      p->grad = backend.zeros(p->value.shape(), DType::f32);
      p->compute = Tensor();
      p->compute_grad = Tensor();
      const bool reduced = compute != DType::f32 && !p->keep_f32;
      const bool channels_last = layout == Layout::nhwc && p->value.ndim() == 4;  // (K, C, R, S) as KRSC
      if (reduced || channels_last) {
        const DType dtype = reduced ? compute : DType::f32;
        const Layout l = channels_last ? Layout::nhwc : Layout::nchw;
        p->compute = backend.empty(p->value.shape(), dtype, l);
        p->compute_grad = backend.zeros(p->value.shape(), dtype, l);
      }
    }
    for (Buffer* b : node.layer->buffers()) b->value = backend.upload(b->value);
  }
  refresh_compute_weights(backend);
  fuse_relus();
}

bool Model::draws_per_step() const {
  return std::any_of(nodes_.begin(), nodes_.end(), [](const Node& n) { return n.layer->draws_per_step(); });
}

std::vector<const void*> Model::storage() const {
  std::vector<const void*> out;
  for (const Node& node : nodes_) {
    for (Parameter* p : node.layer->parameters())
      for (const Tensor* t : {&p->value, &p->grad, &p->compute, &p->compute_grad})
        out.push_back(t->defined() ? t->raw() : nullptr);
    for (Buffer* b : node.layer->buffers()) out.push_back(b->value.raw());
  }
  return out;
}

void Model::refresh_compute_weights(Backend& backend) {
  for (Node& node : nodes_)
    for (Parameter* p : node.layer->parameters())
      if (p->compute.defined()) backend.ops().cast(p->value, p->compute);
}

Tensor Model::forward(Backend& backend, const Tensor& x, const StepInfo& step) {
  if (x.ndim() != 4 || Shape(x.shape().begin() + 1, x.shape().end()) != input_shape_)
    throw InputError("model '" + name_ + "' expects input (N, " + shape_str(input_shape_).substr(1) +
                     ", got " + shape_str(x.shape()));
  const Tensor input = in_layout(backend, x, layout_);
  std::vector<Tensor> outputs(nodes_.size());
  std::vector<Tensor> inputs;
  auto inputs_of = [&](const Node& node) {
    inputs.clear();
    for (int src : node.inputs) inputs.push_back(src < 0 ? input : outputs[src]);
  };
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    if (node.runs_at_join) continue;  // its add runs it, below
    // The node whose layer does the work: a join's batch norm does its add (and ReLU), so an
    // observer times the batch norm with them and the add as doing nothing, as a fused ReLU.
    const int worker = node.adds_from >= 0 ? node.adds_from : static_cast<int>(i);
    if (observer_) observer_->before(worker, false);
    if (node.adds_from >= 0) {
      const int other = node.inputs[0] == node.adds_from ? node.inputs[1] : node.inputs[0];
      const Tensor residual = other < 0 ? input : outputs[other];
      inputs_of(nodes_[node.adds_from]);
      outputs[i] = nodes_[node.adds_from].layer->forward_adding(backend, inputs, residual, node.relu_after, step);
      outputs[node.adds_from] = outputs[i];  // never read: its one reader is this add
    } else {
      inputs_of(node);
      // A fused ReLU or a folded convolution hands its input through: the layer reading it does its work.
      outputs[i] = node.fused || node.folded ? inputs[0] : node.layer->forward(backend, inputs, step);
    }
    if (observer_) observer_->after(worker, false);
    if (observer_ && worker != static_cast<int>(i)) {
      observer_->before(static_cast<int>(i), false);
      observer_->after(static_cast<int>(i), false);
    }
  }
  Tensor logits = outputs[output_node_];
  if (step.training) {
    saved_input_ = input;
    activations_ = std::move(outputs);
  } else {
    saved_input_ = Tensor();
    activations_.clear();
  }
  return logits;
}

Tensor* Model::gradient_sum_to_add_into(const Node& node, std::vector<Tensor>& grads) const {
  if (!add_input_grads_ || node.inputs.size() != 1 || node.inputs[0] < 0 || !node.layer->adds_input_grad())
    return nullptr;
  Tensor& sum = grads[node.inputs[0]];
  const Tensor& input = activations_[node.inputs[0]];
  // Only a sum no one else holds (Add hands one gradient to both its inputs) and that has
  // the input's own shape, dtype and layout.
  if (!sum.defined() || !sum.sole_owner() || sum.shape() != input.shape() || sum.dtype() != input.dtype() ||
      sum.layout() != input.layout())
    return nullptr;
  return &sum;
}

void Model::backward(Backend& backend, const Tensor& grad_logits, const GradsReady& on_ready) {
  CONVOY_CHECK(activations_.size() == nodes_.size(), "backward without a training forward");
  std::vector<Tensor> grads(nodes_.size());  // d(loss)/d(output of node i)
  gradient_sums_in_op_ = 0;
  grads[output_node_] = grad_logits;
  std::vector<Tensor> inputs;
  // The f32 gradients of a layer's parameters, from the compute-dtype ones it wrote.
  auto finish_grads = [&](Node& node) {
    const std::vector<Parameter*> params = node.layer->parameters();
    for (Parameter* p : params)
      if (p->compute_grad.defined()) backend.ops().cast(p->compute_grad, p->grad);
    if (on_ready && !params.empty()) on_ready(params);
  };
  for (int i = static_cast<int>(nodes_.size()) - 1; i >= 0; --i) {
    Node& node = nodes_[i];
    if (!grads[i].defined()) {  // does not reach the output
      finish_grads(node);
      continue;
    }
    inputs.clear();
    const size_t n = node.inputs.size();
    auto needs = std::make_unique<bool[]>(n);  // no gradient flows into the image batch
    for (size_t k = 0; k < n; ++k) {
      const int src = node.inputs[k];
      inputs.push_back(src < 0 ? saved_input_ : activations_[src]);
      needs[k] = src >= 0;
    }
    if (observer_) observer_->before(i, true);
    std::vector<Tensor> dx;
    if (node.fused) {
      dx = {grads[i]};  // the layer below takes it
    } else if (Tensor* sum = gradient_sum_to_add_into(node, grads)) {
      node.layer->backward_adding(backend, inputs, activations_[i], grads[i], *sum);
      ++gradient_sums_in_op_;
      dx.resize(1);  // added: nothing left to sum
    } else {
      dx = node.layer->backward(backend, inputs, activations_[i], grads[i], std::span<const bool>(needs.get(), n));
    }
    if (observer_) observer_->after(i, true);
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const int src = node.inputs[k];
      if (src < 0 || !dx[k].defined()) continue;
      if (!grads[src].defined()) {
        grads[src] = dx[k];
      } else {
        // A tensor read by several layers: sum their gradients (out of place, since a
        // gradient handed down may be shared, as Add's is).
        Tensor sum = backend.empty(dx[k].shape(), dx[k].dtype(), dx[k].layout());
        backend.ops().add(grads[src], dx[k], sum);
        grads[src] = sum;
      }
    }
    grads[i] = Tensor();
    activations_[i] = Tensor();
    finish_grads(node);
  }
  activations_.clear();
  saved_input_ = Tensor();
}

std::vector<Model::GraphNode> Model::graph_nodes() {
  std::vector<GraphNode> out;
  for (Node& node : nodes_) out.push_back({node.layer.get(), node.inputs, node.shape});
  return out;
}

std::vector<std::pair<std::string, Parameter*>> Model::parameters() {
  ++weights_version_;
  std::vector<std::pair<std::string, Parameter*>> out;
  for (Node& node : nodes_)
    for (Parameter* p : node.layer->parameters()) out.emplace_back(node.layer->name() + "." + p->name, p);
  return out;
}

std::vector<NamedTensor> Model::state() {
  std::vector<NamedTensor> out;
  for (auto& [name, p] : parameters()) out.push_back({name, p->value});
  for (Node& node : nodes_)
    for (Buffer* b : node.layer->buffers()) out.push_back({node.layer->name() + "." + b->name, b->value});
  return out;
}

void Model::load_state(const std::vector<NamedTensor>& tensors, const std::string& source) {
  std::map<std::string, const Tensor*> by_name;
  for (const auto& t : tensors) by_name[t.name] = &t.tensor;
  for (NamedTensor& slot : state()) {
    auto it = by_name.find(slot.name);
    if (it == by_name.end())
      throw InputError(source + ": tensor '" + slot.name + "' of model '" + name_ + "' is missing");
    const Tensor& src = *it->second;
    if (src.shape() != slot.tensor.shape() || src.dtype() != DType::f32)
      throw InputError(source + ": tensor '" + slot.name + "' is " + shape_str(src.shape()) + " " +
                       std::string(dtype_name(src.dtype())) + ", the model needs " +
                       shape_str(slot.tensor.shape()) + " F32");
    slot.tensor.copy_from(src);  // slot.tensor shares storage with the layer's tensor
  }
}

std::vector<LayerInfo> Model::layer_infos() const {
  std::vector<LayerInfo> infos;
  infos.reserve(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    LayerInfo info;
    info.name = node.layer->name();
    info.type = std::string(node.layer->type());
    std::vector<Shape> in;
    for (int src : node.inputs) {
      info.inputs.push_back(src < 0 ? "input" : nodes_[src].layer->name());
      in.push_back(src < 0 ? input_shape_ : nodes_[src].shape);
    }
    info.reads_previous = node.inputs.size() == 1 && node.inputs[0] == static_cast<int>(i) - 1;
    info.output = node.shape;
    for (Parameter* p : node.layer->parameters()) info.parameters += p->value.numel();
    for (Buffer* b : node.layer->buffers()) info.buffers += b->value.numel();
    info.flops = node.layer->forward_flops(in, node.shape);
    infos.push_back(std::move(info));
  }
  return infos;
}

int64_t Model::parameter_count() const {
  int64_t n = 0;
  for (const LayerInfo& info : layer_infos()) n += info.parameters;
  return n;
}

int64_t Model::buffer_count() const {
  int64_t n = 0;
  for (const LayerInfo& info : layer_infos()) n += info.buffers;
  return n;
}

int64_t Model::forward_flops() const {
  int64_t flops = 0;
  for (const LayerInfo& info : layer_infos()) flops = saturating_add(flops, info.flops);
  return flops;
}

int64_t Model::activation_count() const {
  int64_t n = 0;
  for (const Node& node : nodes_) n += shape_numel(node.shape);
  return n;
}

std::string Model::summary() const {
  std::ostringstream out;
  out << "model " << name_ << ": input " << shape_str(input_shape_) << ", "
      << parameter_count() << " parameters, " << forward_flops() / 1e6 << " MFLOP per image\n";
  for (const LayerInfo& info : layer_infos())
    out << "  " << info.name << " (" << info.type << ") -> " << shape_str(info.output)
        << (info.parameters ? ", " + std::to_string(info.parameters) + " params" : "") << "\n";
  return out.str();
}

}  // namespace convoy
