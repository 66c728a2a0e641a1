// What in an ONNX graph takes several nodes, or makes no layer: GELU's erf formula, SiLU's
// x * Sigmoid(x), the other activations' bounds, torch.onnx's shape arithmetic of
// x.view(x.size(0), -1), pads of zero (torch.onnx's before AvgPool2d), ReduceMean over H and W
// (x.mean((2, 3))), and the check of ceil_mode pooling on the built model.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <variant>

#include "engine/graph/model.h"
#include "engine/interchange/onnx_importer.h"
#include "engine/layers/layer_spec.h"

namespace convoy::onnx_import {

// Gelu before opset 20, as torch.onnx and `convoy export` write it: x * (erf(x / sqrt(2)) + 1) * 0.5,
// five nodes from nodes[i] (Constant nodes left out). Returns how many nodes became one gelu layer (0: not the formula).
size_t Importer::gelu_formula_at(const std::vector<const NodeProto*>& nodes, size_t i) {
  if (i + 5 > nodes.size()) return 0;
  const NodeProto &div = *nodes[i], &erf = *nodes[i + 1], &add = *nodes[i + 2], &mul = *nodes[i + 3],
                  &half = *nodes[i + 4];
  auto other = [](const NodeProto& n, const std::string& v) { return n.input(0) == v ? n.input(1) : n.input(0); };
  auto reads = [](const NodeProto& n, const std::string& v) {
    return n.input_size() == 2 && (n.input(0) == v || n.input(1) == v);
  };
  if (div.op_type() != "Div" || div.input_size() != 2 || !scalar_is(div.input(1), std::sqrt(2.0))) return 0;
  const std::string& x = div.input(0);
  if (erf.op_type() != "Erf" || erf.input(0) != div.output(0)) return 0;
  if (add.op_type() != "Add" || !reads(add, erf.output(0)) || !scalar_is(other(add, erf.output(0)), 1.0)) return 0;
  if (mul.op_type() != "Mul" || !reads(mul, add.output(0)) || other(mul, add.output(0)) != x) return 0;
  if (half.op_type() != "Mul" || !reads(half, mul.output(0)) || !scalar_is(other(half, mul.output(0)), 0.5)) return 0;
  YamlLayer layer;
  layer.name = unique_name(half, "");
  layer.type = ActivationSpec{.kind = Activation::gelu}.type();
  layer.inputs.push_back(layer_of(div, x));
  add_layer(half, std::move(layer));
  return 5;
}

bool Importer::convert_activation(const NodeProto& node) {
  const std::string& op = node.op_type();
  if (op != "Sigmoid" && op != "HardSigmoid" && op != "HardSwish" && op != "Clip") return false;
  YamlLayer layer;
  layer.inputs.push_back(layer_of(node, node.input(0)));
  Activation kind = Activation::sigmoid;
  const NodeProto* last = &node;  // the node whose output the layer's is
  if (op == "Sigmoid") {
    // SiLU as torch.onnx writes it: Mul(x, Sigmoid(x)), the Sigmoid read by nothing else.
    const auto& readers = consumers_[node.output(0)];
    if (readers.size() == 1 && readers[0]->op_type() == "Mul" && readers[0]->input_size() == 2) {
      const NodeProto& mul = *readers[0];
      const std::string& other = mul.input(0) == node.output(0) ? mul.input(1) : mul.input(0);
      if (other == node.input(0)) {
        kind = Activation::silu;
        absorbed_.insert(&mul);
        last = &mul;
      }
    }
  } else if (op == "HardSigmoid") {
    const double alpha = attr_float(node, "alpha", 0.2), beta = attr_float(node, "beta", 0.5);  // ONNX's defaults
    if (std::abs(alpha - kHardSigmoidAlpha) > 1e-6 || std::abs(beta - kHardSigmoidBeta) > 1e-6)
      fail_node(node, "alpha " + number_yaml(alpha) + " and beta " + number_yaml(beta) +
                          " are not supported (Convoy's hardsigmoid is PyTorch's: alpha 1/6, beta 1/2)");
    kind = Activation::hardsigmoid;
  } else if (op == "HardSwish") {
    kind = Activation::hardswish;
  } else {  // Clip: its bounds are inputs from opset 11, attributes before
    const double inf = std::numeric_limits<double>::infinity();
    double lo = attr_float(node, "min", -inf), hi = attr_float(node, "max", inf);
    if (node.input_size() > 1 && !node.input(1).empty()) lo = scalar(node, node.input(1));
    if (node.input_size() > 2 && !node.input(2).empty()) hi = scalar(node, node.input(2));
    if (hi >= std::numeric_limits<float>::max()) hi = inf;  // some exporters write FLT_MAX for "none"
    if (lo == 0 && hi == kRelu6Max) kind = Activation::relu6;
    else if (lo == 0 && hi == inf) kind = Activation::relu;
    else
      fail_node(node, "bounds (" + number_yaml(lo) + ", " + number_yaml(hi) +
                          ") are not supported (Convoy clips as relu6, (0, 6), and as relu, (0, none))");
  }
  layer.name = unique_name(*last, "");  // SiLU's Mul is named as the layer (torch's module, convoy export's layer)
  layer.type = ActivationSpec{.kind = kind}.type();
  add_layer(*last, std::move(layer));
  return true;
}

bool Importer::convert_shape_arithmetic(const NodeProto& node) {
  using Elem = ShapeValue::Elem;
  const std::string& op = node.op_type();
  const std::string& out = node.output(0);
  auto is_shape = [&](const std::string& v) { return shape_values_.count(v) > 0; };
  // A shape value or an int64 constant as a ShapeValue.
  auto value = [&](const std::string& v) {
    if (auto it = shape_values_.find(v); it != shape_values_.end()) return it->second;
    ShapeValue s;
    for (int64_t x : int_constant(node, v)) s.elems.push_back({Elem::constant, x});
    s.scalar = constants_.at(v)->dims_size() == 0;
    return s;
  };
  if (op == "Shape") {
    layer_of(node, node.input(0));  // a tensor the import holds
    if (attr_int(node, "start", 0) != 0) fail_node(node, "only start 0 is supported");
    ShapeValue whole;
    whole.whole = true;
    shape_values_[out] = whole;
    return true;
  }
  if ((op == "Gather" || op == "Unsqueeze" || op == "Cast" || op == "Squeeze" || op == "Slice") &&
      !is_shape(node.input(0)))
    return false;
  if (op == "Cast" || op == "Squeeze") {  // int64 stays int64 here; a squeezed 1-vector is the same number
    shape_values_[out] = shape_values_[node.input(0)];
    return true;
  }
  if (op == "Gather") {
    if (attr_int(node, "axis", 0) != 0 || node.input_size() != 2) fail_node(node, "only axis 0 of a shape is supported");
    const ShapeValue from = shape_values_[node.input(0)];
    ShapeValue s = value(node.input(1));  // the indices
    for (auto& [kind, index] : s.elems) {
      if (kind != Elem::constant) fail_node(node, "the indices must be constants");
      if (from.whole) {
        kind = index == 0 ? Elem::batch : Elem::other;
        continue;
      }
      const auto n = static_cast<int64_t>(from.elems.size());
      if (index < -n || index >= n) fail_node(node, "index " + std::to_string(index) + " is out of range");
      const auto picked = from.elems[static_cast<size_t>(index < 0 ? index + n : index)];
      kind = picked.first;
      index = picked.second;
    }
    shape_values_[out] = s;
    return true;
  }
  if (op == "Slice" && is_shape(node.input(0))) {
    // Slice(Shape(x), 0, 2): F.interpolate's (N, C) before the output size it appends.
    const std::vector<int64_t> starts =
        node.input_size() > 1 ? int_constant(node, node.input(1)) : attr_ints(node, "starts", {});
    const std::vector<int64_t> ends =
        node.input_size() > 2 ? int_constant(node, node.input(2)) : attr_ints(node, "ends", {});
    const std::vector<int64_t> axes =
        node.input_size() > 3 && !node.input(3).empty() ? int_constant(node, node.input(3))
                                                        : attr_ints(node, "axes", {0});
    const std::vector<int64_t> steps =
        node.input_size() > 4 && !node.input(4).empty() ? int_constant(node, node.input(4)) : std::vector<int64_t>{1};
    if (starts.size() != 1 || ends.size() != 1 || axes != std::vector<int64_t>{0} || steps != std::vector<int64_t>{1})
      fail_node(node, "only a slice [start:end] of a shape is supported");
    const ShapeValue from = shape_values_[node.input(0)];
    // A whole shape is an image batch's here (N, C, H, W): the only tensors whose shapes are taken apart.
    const auto n = from.whole ? int64_t{4} : static_cast<int64_t>(from.elems.size());
    auto clamp = [&](int64_t i) { return std::clamp(i < 0 ? i + n : i, int64_t{0}, n); };
    ShapeValue s;
    for (int64_t i = clamp(starts[0]); i < clamp(ends[0]); ++i)
      s.elems.push_back(from.whole ? std::pair{i == 0 ? Elem::batch : Elem::other, i}
                                   : from.elems[static_cast<size_t>(i)]);
    shape_values_[out] = s;
    return true;
  }
  if (op == "Unsqueeze") {
    const std::vector<int64_t> axes =
        node.input_size() > 1 ? int_constant(node, node.input(1)) : attr_ints(node, "axes", {});
    ShapeValue s = shape_values_[node.input(0)];
    if (!s.scalar || axes != std::vector<int64_t>{0}) fail_node(node, "only a number unsqueezed on axis 0 is supported");
    s.scalar = false;
    shape_values_[out] = s;
    return true;
  }
  if (op == "Concat" && std::any_of(node.input().begin(), node.input().end(), is_shape)) {
    ShapeValue s;
    for (const std::string& in : node.input()) {
      const ShapeValue part = value(in);
      if (part.whole || part.scalar) fail_node(node, "only vectors of known length are concatenated here");
      s.elems.insert(s.elems.end(), part.elems.begin(), part.elems.end());
    }
    shape_values_[out] = s;
    return true;
  }
  if (op != "Reshape") return false;
  if (node.input_size() != 2 || (!is_shape(node.input(1)) && !is_int_constant(node.input(1))))
    fail_node(node, "the shape must be a constant or computed from shapes");
  const ShapeValue s = value(node.input(1));
  // (N, -1): the batch as Gather(Shape(x), 0), as 0 ("copy", unless allowzero), or as the input's fixed batch size.
  const bool batch = !s.elems.empty() &&
                     (s.elems[0].first == Elem::batch ||
                      (s.elems[0].first == Elem::constant &&
                       ((s.elems[0].second == 0 && attr_int(node, "allowzero", 0) == 0) ||
                        (s.elems[0].second > 0 && s.elems[0].second == input_batch_))));
  if (s.whole || s.elems.size() != 2 || !batch || s.elems[1] != std::pair{Elem::constant, int64_t{-1}})
    fail_node(node, "only a Reshape to (N, -1), a flatten, is supported");
  YamlLayer layer;
  layer.name = unique_name(node, "");
  layer.type = FlattenSpec::type();
  layer.inputs.push_back(layer_of(node, node.input(0)));
  add_layer(node, std::move(layer));
  return true;
}

bool Importer::convert_pad(const NodeProto& node) {
  if (node.op_type() != "Pad") return false;
  const std::vector<int64_t> pads = node.input_size() > 1 && !node.input(1).empty() ? int_constant(node, node.input(1))
                                                                                   : attr_ints(node, "pads", {});
  if (std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; }))
    fail_node(node, "pads " + ints_yaml(pads) +
                        " are not supported: Convoy pads inside a convolution or pooling, and its avgpool2d leaves "
                        "the padding out of the average (export PyTorch's AvgPool2d with count_include_pad=False)");
  // torch.onnx writes a Pad of zeros before each AvgPool2d with count_include_pad: the identity.
  layer_of_[node.output(0)] = layer_of(node, node.input(0));
  return true;
}

bool Importer::convert_reduce_mean(const NodeProto& node) {
  if (node.op_type() != "ReduceMean") return false;
  // The axes are an attribute up to opset 17, an input from 18.
  std::vector<int64_t> axes =
      node.input_size() > 1 && !node.input(1).empty() ? int_constant(node, node.input(1)) : attr_ints(node, "axes", {});
  for (int64_t& a : axes) a = a < 0 ? a + 4 : a;  // of an image batch (N, C, H, W)
  std::sort(axes.begin(), axes.end());
  if (axes != std::vector<int64_t>{2, 3})
    fail_node(node, "axes " + ints_yaml(axes) + " are not supported (Convoy averages over H and W: global_avg_pool)");
  YamlLayer pool;
  pool.name = unique_name(node, "");
  pool.type = GlobalPoolSpec{.kind = PoolKind::avg}.type();
  pool.inputs.push_back(layer_of(node, node.input(0)));
  if (attr_int(node, "keepdims", 1) != 0) {
    add_layer(node, std::move(pool));
    return true;
  }
  // keepdims 0 gives (N, C): the pooled (N, C, 1, 1) flattened.
  YamlLayer flat;
  flat.name = pool.name + "_flat";
  for (int k = 1; taken_.count(flat.name); ++k) flat.name = pool.name + "_flat_" + std::to_string(k);
  taken_.insert(flat.name);
  flat.type = FlattenSpec::type();
  flat.inputs.push_back(pool.name);
  layers_.push_back(std::move(pool));
  add_layer(node, std::move(flat));
  return true;
}

void Importer::check_ceil_mode(const std::string& yaml) const {
  if (ceil_pools_.empty()) return;
  Model model = Model::from_yaml(yaml, source_, 0);
  const std::vector<Model::GraphNode> nodes = model.graph_nodes();
  // Whether ceil_mode gives a window more than floor does: PyTorch's and ONNX Runtime's rule,
  // which drops a last window that would start in the padding.
  auto extra_window = [](int64_t size, int64_t kernel, int64_t stride, int64_t pad) {
    const int64_t span = size + 2 * pad - kernel;
    int64_t ceil_out = (span + stride - 1) / stride + 1;
    if ((ceil_out - 1) * stride >= size + pad) --ceil_out;
    return ceil_out != span / stride + 1;
  };
  for (const auto& [name, onnx_node] : ceil_pools_)
    for (const Model::GraphNode& n : nodes) {
      if (n.layer->name() != name) continue;
      const Shape in = n.inputs[0] < 0 ? model.input_shape() : nodes[static_cast<size_t>(n.inputs[0])].shape;  // (C, H, W)
      const Pool2dParams p = std::get<Pool2dSpec>(n.layer->spec()).params;
      if (extra_window(in[1], p.kernel_h, p.stride_h, p.pad_h) || extra_window(in[2], p.kernel_w, p.stride_w, p.pad_w))
        fail_node(*onnx_node, "ceil_mode 1 adds a window at the bottom or right edge of its " + std::to_string(in[1]) +
                                  "x" + std::to_string(in[2]) +
                                  " input, which Convoy's pooling (floor, symmetric padding) does not have");
    }
}

}  // namespace convoy::onnx_import
