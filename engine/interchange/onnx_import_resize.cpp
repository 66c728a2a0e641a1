// ONNX Resize and Upsample as Convoy's upsample layer, and Softmax as its softmax layer.
// torch.onnx writes nn.Upsample / F.interpolate as Resize with constant scales (an integer
// scale_factor) or with sizes computed as Concat(Slice(Shape(x), 0, 2), [H, W]) (a size), whose
// shape arithmetic onnx_import_patterns.cpp folds; nearest as asymmetric/floor and bilinear
// (align_corners=False) as half_pixel. Anything else is refused naming the node, op and why.
#include <cmath>

#include "engine/graph/model.h"
#include "engine/interchange/onnx_importer.h"
#include "engine/layers/layer_spec.h"

namespace convoy::onnx_import {

namespace {

std::string string_attr(const AttributeProto* a, const std::string& fallback) { return a ? a->s() : fallback; }

}  // namespace

bool Importer::convert_resize(const NodeProto& node) {
  const std::string& op = node.op_type();
  if (op != "Resize" && op != "Upsample") return false;
  const std::string mode = string_attr(attr(node, "mode"), "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "bilinear")
    fail_node(node, "mode '" + mode + "' is not supported (Convoy upsamples nearest and bilinear)");
  const bool linear = mode != "nearest";
  // Opset 10's Resize and every Upsample map coordinates asymmetrically.
  const bool v10 = op == "Upsample" || node.input_size() == 2;
  const std::string transform =
      v10 ? "asymmetric" : string_attr(attr(node, "coordinate_transformation_mode"), "half_pixel");
  if (linear && transform != "half_pixel" && transform != "pytorch_half_pixel")
    fail_node(node, "linear with coordinate_transformation_mode '" + transform +
                        "' is not supported (Convoy's bilinear is PyTorch's align_corners=False: half_pixel)");
  if (!linear) {
    const std::string rounding = v10 ? "floor" : string_attr(attr(node, "nearest_mode"), "round_prefer_floor");
    if (transform != "asymmetric" || rounding != "floor")
      fail_node(node, "nearest with coordinate_transformation_mode '" + transform + "' and nearest_mode '" + rounding +
                          "' is not supported (Convoy's nearest is PyTorch's: asymmetric, floor)");
  }
  if (attr_int(node, "antialias", 0) != 0) fail_node(node, "antialias 1 is not supported");
  if (attr(node, "axes")) fail_node(node, "the axes attribute is not supported (resize H and W of (N, C, H, W))");
  if (!v10 && string_attr(attr(node, "keep_aspect_ratio_policy"), "stretch") != "stretch")
    fail_node(node, "keep_aspect_ratio_policy other than stretch is not supported");

  YamlLayer layer;
  layer.name = unique_name(node, "");
  layer.type = UpsampleSpec::type();
  layer.inputs.push_back(layer_of(node, node.input(0)));
  if (linear) layer.attrs.push_back({"mode", "bilinear"});
  // Resize(X, roi, scales, sizes) from opset 11, Resize(X, scales) in 10, Upsample(X, scales) from 9,
  // Upsample with a scales attribute before.
  const int scales_at = v10 ? 1 : 2, sizes_at = 3;
  auto given = [&](int i) { return node.input_size() > i && !node.input(i).empty(); };
  if (given(sizes_at)) {
    using Elem = ShapeValue::Elem;
    ShapeValue sizes;
    if (auto it = shape_values_.find(node.input(sizes_at)); it != shape_values_.end()) {
      sizes = it->second;
    } else {
      for (int64_t v : int_constant(node, node.input(sizes_at))) sizes.elems.push_back({Elem::constant, v});
    }
    // (N, C, H, W): the batch and channels as they come (Slice(Shape(x), 0, 2)), a fixed H and W.
    const bool keeps_nc =
        sizes.elems.size() == 4 && (sizes.elems[0].first == Elem::batch || sizes.elems[0].first == Elem::constant) &&
        (sizes.elems[1] == std::pair{Elem::other, int64_t{1}} || sizes.elems[1].first == Elem::constant);
    if (sizes.whole || !keeps_nc || sizes.elems[2].first != Elem::constant || sizes.elems[3].first != Elem::constant)
      fail_node(node, "sizes must keep N and C and give H and W as constants at the model's input size");
    if (sizes.elems[2].second < 1 || sizes.elems[3].second < 1) fail_node(node, "sizes must be positive");
    if (sizes.elems[1].first == Elem::constant) resize_channels_.push_back({layer.name, &node, sizes.elems[1].second});
    layer.attrs.push_back({"size", "[" + std::to_string(sizes.elems[2].second) + ", " +
                                       std::to_string(sizes.elems[3].second) + "]"});
  } else {
    std::vector<float> scales;
    if (given(scales_at)) {
      const Tensor t = constant(node, node.input(scales_at));
      scales.assign(t.data<float>(), t.data<float>() + t.numel());
    } else if (const AttributeProto* a = attr(node, "scales")) {
      scales.assign(a->floats().begin(), a->floats().end());
    } else {
      fail_node(node, "expected scales or sizes");
    }
    if (scales.size() != 4 || scales[0] != 1.0f || scales[1] != 1.0f)
      fail_node(node, "scales must be [1, 1, sh, sw] (resize H and W only)");
    std::vector<int64_t> whole;
    for (int i = 2; i < 4; ++i) {
      const float s = scales[static_cast<size_t>(i)];
      if (!(s >= 1.0f && s <= 64.0f && std::abs(s - std::round(s)) <= 1e-6f * s))
        fail_node(node, "scale " + number_yaml(s) +
                            " is not supported (Convoy upsamples by a whole factor 1 ... 64, or to sizes: export "
                            "F.interpolate with an integer scale_factor or a size)");
      whole.push_back(static_cast<int64_t>(std::lround(s)));
    }
    layer.attrs.push_back({"scale", ints_yaml(whole)});
  }
  add_layer(node, std::move(layer));
  return true;
}

bool Importer::convert_softmax(const NodeProto& node) {
  if (node.op_type() != "Softmax") return false;
  int64_t opset = 13;
  for (const auto& o : proto_.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  // Opset 13's Softmax runs over one axis (default -1); before, over everything from `axis`
  // (default 1) on, flattened.
  const int64_t axis = attr_int(node, "axis", opset >= 13 ? -1 : 1);
  YamlLayer layer;
  layer.name = unique_name(node, "");
  layer.type = SoftmaxSpec::type();
  layer.inputs.push_back(layer_of(node, node.input(0)));
  const bool channels_by_rank = axis == 1 && opset >= 13;  // C of (N, C) or (N, C, H, W)
  if (!channels_by_rank) {
    // axis -1 (or 1 before opset 13) is the channels only where the input is (N, C): checked on the built model.
    if (axis != -1 && axis != 1)
      fail_node(node, "axis " + std::to_string(axis) +
                          " is not supported (Convoy's softmax runs over the channels, axis 1)");
    flat_softmaxes_.push_back({layer.name, &node});
  }
  add_layer(node, std::move(layer));
  return true;
}

void Importer::check_on_built_model(const std::string& yaml) const {
  if (flat_softmaxes_.empty() && resize_channels_.empty()) return;
  Model model = Model::from_yaml(yaml, source_, 0);
  const std::vector<Model::GraphNode> nodes = model.graph_nodes();
  auto input_of = [&](const std::string& name) {
    for (const Model::GraphNode& n : nodes)
      if (n.layer->name() == name)
        return n.inputs[0] < 0 ? model.input_shape() : nodes[static_cast<size_t>(n.inputs[0])].shape;
    throw InternalError("import: layer '" + name + "' is not in the model it made");
  };
  for (const auto& [name, onnx_node] : flat_softmaxes_)
    if (const Shape in = input_of(name); in.size() != 1)
      fail_node(*onnx_node, "axis " + std::to_string(attr_int(*onnx_node, "axis", -1)) + " of its " + shape_str(in) +
                                " input per sample is not the channels alone, which Convoy's softmax runs over "
                                "(export softmax over dim 1)");
  for (const ResizeChannels& r : resize_channels_)
    if (const Shape in = input_of(r.layer); in[0] != r.channels)
      fail_node(*r.node, "sizes give " + std::to_string(r.channels) + " channels to an input of " +
                             std::to_string(in[0]) + " (a resize keeps the channels)");
}

}  // namespace convoy::onnx_import
