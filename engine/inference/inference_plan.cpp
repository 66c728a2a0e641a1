// InferencePlan: fusion groups from the model's DAG, one oneDNN primitive per group, buffers
// placed in one arena by lifetime, and run().
#include "engine/inference/inference_plan.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string_view>

#include "engine/backends/cpu/onednn_compat.h"
#include "engine/core/error.h"
#include "engine/inference/plan_state.h"

namespace convoy {

using namespace plan;

namespace {

// A group's activation as a post-op; with act_scaled (int8) it runs on the real values and the
// output scale sy multiplies its result (oneDNN 2.x would otherwise scale before the post-ops).
// An affine tail (hardsigmoid's) is a second eltwise_linear post-op, which then takes the scale.
void append_activation(dnnl::post_ops& ops, const Layer& layer, bool act_scaled, float sy) {
  const auto spec = std::get<ActivationSpec>(layer.spec());
  const cpu::OnednnActivation a = cpu::onednn_activation(spec.kind, spec.alpha());
  auto append = [&](bool last, dnnl::algorithm alg, float alpha, float beta) {
    if (act_scaled)
      cpu::onednn::append_eltwise_scaled(ops, last ? sy : 1.0f, alg, alpha, beta);
    else
      cpu::onednn::append_eltwise(ops, alg, alpha, beta);
  };
  append(!a.affine(), a.alg, a.alpha, a.beta);
  if (a.affine()) append(true, dnnl::algorithm::eltwise_linear, a.scale, a.shift);
}

// fp32 3x3 stride-1 convolutions run through Winograd F(4x4, 3x3) where oneDNN has it (AVX-512):
// 2.25x fewer multiplications, within the plan's 1e-4 of the direct forward. It pays from 16 4x4
// output tiles (a 14x14 output at batch 1) on 2 threads as on 16; with fewer (a 7x7 output at
// batch 1) its transforms cost more than they save (fmnet at batch 1 1.4x slower). The earlier
// rule of 16 tiles a thread left ResNet-18 at batch 1 and ResNet-50 and ResNet-18 at batch 32
// about 10% slower (benchmarks/RESULTS.md). out: (K, P, Q).
bool winograd_pays(const Conv2dParams& p, const Tensor& w, const Shape& out, int64_t batch) {
  if (p.groups != 1 || w.dim(2) != 3 || w.dim(3) != 3 || p.stride_h != 1 || p.stride_w != 1 || p.dilation_h != 1 ||
      p.dilation_w != 1)
    return false;
  constexpr int64_t kMinTiles = 16;
  return batch * ((out[1] + 3) / 4) * ((out[2] + 3) / 4) >= kMinTiles;
}

}  // namespace

bool plan::runs_winograd(Model& model, int64_t batch, const InferenceOptions& options) {
  if (!options.winograd || options.precision != Precision::fp32 || !cpu_has(dnnl::cpu_isa::avx512_core))
    return false;
  for (const Model::GraphNode& n : model.graph_nodes()) {
    const LayerSpec spec = n.layer->spec();
    if (const auto* conv = std::get_if<Conv2dSpec>(&spec);
        conv && winograd_pays(conv->params, n.layer->parameters().at(0)->value, n.shape, batch))
      return true;
  }
  return false;
}

using dnnl::algorithm;
using dnnl::prop_kind;

std::vector<Group> fuse_groups(const Model& model, const std::vector<Model::GraphNode>& nodes) {
  const int n = static_cast<int>(nodes.size());
  std::vector<std::vector<int>> consumers(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    for (int src : nodes[i].inputs)
      if (src >= 0) consumers[src].push_back(i);
  const int out = model.output_node();
  // The one node reading `i`'s output, or -1 (none, several, or the model's output).
  std::vector<bool> taken(static_cast<size_t>(n), false);
  auto sole = [&](int i) {
    return i != out && consumers[i].size() == 1 && !taken[consumers[i][0]] ? consumers[i][0] : -1;
  };
  auto spec = [&](int i) { return nodes[i].layer->spec(); };
  std::vector<Group> groups;
  for (int i = 0; i < n; ++i) {
    if (taken[i]) continue;
    Group g;
    g.head = g.last = i;
    const LayerSpec head = spec(i);
    const bool conv = std::holds_alternative<Conv2dSpec>(head), bn = std::holds_alternative<BatchNormSpec>(head);
    if (conv) {
      if (int c = sole(g.last); c >= 0 && std::holds_alternative<BatchNormSpec>(spec(c))) g.bn = g.last = c;
    }
    if (conv || bn) {
      if (int c = sole(g.last); c >= 0 && std::holds_alternative<AddSpec>(spec(c)) && nodes[c].inputs.size() == 2) {
        const int other = nodes[c].inputs[0] == g.last ? nodes[c].inputs[1] : nodes[c].inputs[0];
        if (other != g.last) g.add = c, g.residual = other, g.last = c;
      }
    }
    if (conv || bn || std::holds_alternative<LinearSpec>(head)) {
      if (int c = sole(g.last); c >= 0 && is_activation(spec(c))) g.act = g.last = c;
    }
    for (int j : {g.head, g.bn, g.add, g.act})
      if (j >= 0) taken[j] = true;
    groups.push_back(g);
  }
  // A group runs where its last layer stands: a residual add's other input may come later in the
  // file than the convolution that takes the add.
  std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) { return a.last < b.last; });
  return groups;
}

std::vector<bool> InferencePlan::quantized_outputs(Model& model) {
  const std::vector<Model::GraphNode> nodes = model.graph_nodes();
  std::vector<bool> out(nodes.size(), false);
  for (const Group& g : fuse_groups(model, nodes)) {
    const LayerSpec head = nodes[g.head].layer->spec();
    const bool computes = std::holds_alternative<Conv2dSpec>(head) || std::holds_alternative<BatchNormSpec>(head) ||
                          std::holds_alternative<LinearSpec>(head);
    // As emit_conv and emit_linear read range_of(g.last); the logits stay f32.
    if (computes && g.last != model.output_node()) out[static_cast<size_t>(g.last)] = true;
  }
  return out;
}

// The data type a convolution or inner product writes: the logits stay f32; int8 writes u8
// after a ReLU (when a residual added before it is u8 too), else s8.
Dt InferencePlan::Impl::dst_type(const Group& g, const std::vector<Model::GraphNode>& nodes, Dt residual) const {
  if (g.last == model.output_node() || precision == Precision::fp32) return Dt::f32;
  if (precision == Precision::bf16) return Dt::bf16;
  const bool relu = g.act >= 0 && is_relu(nodes[g.act].layer->spec());
  return relu && (g.add < 0 || residual == Dt::u8) ? Dt::u8 : Dt::s8;
}

// int8: per-channel weight scales (q = w * scale) and the output scales that turn the int32
// accumulator (scaled by src x weight) into the destination's scale.
static std::vector<float> weight_scales(const WeightSlot& ws) {
  std::vector<float> s = ws.channel_max();
  for (float& v : s) v = 127.0f / std::max(v, 1e-12f);
  return s;
}
static std::vector<float> output_scales(const std::vector<float>& wscale, float src_scale, float dst_scale) {
  std::vector<float> o(wscale.size());
  for (size_t k = 0; k < o.size(); ++k) o[k] = dst_scale / (src_scale * wscale[k]);
  return o;
}

int InferencePlan::Impl::emit_conv(const Group& g, const std::vector<Model::GraphNode>& nodes,
                                   std::vector<int>& value_of) {
  const auto& head = nodes[g.head];
  const bool bn_alone = std::holds_alternative<BatchNormSpec>(head.layer->spec());
  const int in = value_of[head.inputs[0] + 1];
  const Dims xd = cpu::onednn::dims_of(values[in].md);  // (N, C, H, W)
  const Shape& out = (g.bn >= 0 ? nodes[g.bn] : head).shape;  // (K, P, Q)
  const int64_t k = out[0], c = xd[1];
  const Conv2dParams p = bn_alone ? Conv2dParams{.groups = c} : std::get<Conv2dSpec>(head.layer->spec()).params;
  const Tensor& w = bn_alone ? Tensor() : head.layer->parameters().at(0)->value;  // (K, C/g, R, S)
  const int64_t r = bn_alone ? 1 : w.dim(2), s = bn_alone ? 1 : w.dim(3);
  const Md user_w = p.groups == 1 ? f32_md({k, c, r, s}, Tag::oihw)
                                  : f32_md({p.groups, k / p.groups, c / p.groups, r, s}, Tag::goihw);
  const Dims wdims = cpu::onednn::dims_of(user_w);
  const Md bias = f32_md({k}, Tag::a);
  auto slot = std::make_shared<WeightSlot>(bn_alone ? nullptr : head.layer,
                                           bn_alone ? head.layer : (g.bn >= 0 ? nodes[g.bn].layer : nullptr), nullptr,
                                           user_w, bias, engine);
  const int res = g.add >= 0 ? value_of[g.residual + 1] : -1;
  const Dt src_dt = src_type(in), dst_dt = dst_type(g, nodes, res >= 0 ? dt_of(res) : Dt::f32);
  const Dt w_dt = precision == Precision::int8 ? Dt::s8 : compute_type();
  const bool int8 = precision == Precision::int8;
  const float sx = quant_scale(src_dt, values[in].range), sy = quant_scale(dst_dt, range_of(g.last));
  const float sr = res >= 0 ? quant_scale(dt_of(res), values[res].range) : 1.0f;
  const std::vector<float> sw = int8 ? weight_scales(*slot) : std::vector<float>{};
  auto activation_tag = [&](Dt dt, int64_t channels) {
    return dt == Dt::f32 && channels % 16 == 0 ? activations : Tag::any;
  };
  const Md any_x(xd, src_dt, activation_tag(src_dt, c)), any_w(wdims, w_dt, Tag::any);
  const Md any_y({batch, k, out[1], out[2]}, dst_dt, activation_tag(dst_dt, k));
  // oneDNN 2.x scales the accumulator before the post-ops: with an activation, int8 computes it on
  // real values (output scale and sum in real units) and scales its result to the destination.
  const bool act_scaled = int8 && g.act >= 0;
  auto make_pd = [&](float sum_scale) {
    dnnl::post_ops ops;
    if (g.add >= 0) ops.append_sum(act_scaled ? sum_scale / sy : sum_scale);
    if (g.act >= 0) append_activation(ops, *nodes[g.act].layer, act_scaled, sy);
    dnnl::primitive_attr attr = attr_with(ops);
    if (int8) cpu::onednn::set_output_scales(attr, 1 << 1, output_scales(sw, sx, act_scaled ? 1.0f : sy));
    auto pd_with = [&](dnnl::algorithm alg) {
      return cpu::onednn::conv_forward_pd(engine, prop_kind::forward_inference, any_x, any_w, &bias, any_y,
                                          {p.stride_h, p.stride_w}, {p.dilation_h - 1, p.dilation_w - 1},
                                          {p.pad_h, p.pad_w}, {p.pad_h, p.pad_w}, attr, alg);
    };
    // oneDNN refuses Winograd (unimplemented) where it has no kernel for it, and in bf16.
    if (winograd && !int8 && !bn_alone && winograd_pays(p, w, out, batch)) {
      try {
        return pd_with(dnnl::algorithm::convolution_winograd);
      } catch (const dnnl::error&) {
      }
    }
    return pd_with(dnnl::algorithm::convolution_direct);
  };
  // Sum post-op: the destination holds the residual, in the destination's scale (int8).
  auto pd = make_pd(sy / sr);
  const bool residual_as_is = res >= 0 && values[res].md == pd.dst_desc();
  if (res >= 0 && !residual_as_is && sy != sr) pd = make_pd(1.0f);  // the copy below rescales
  const int x = in_format(in, pd.src_desc());
  int y = -1;
  if (g.add >= 0) {
    const Buffer& rb = buffers[values[res].buffer];
    // Take over the residual's buffer when every other reader ran before this step (a ResNet
    // block's first convolution reads the identity shortcut first), else copy it.
    bool free_after = rb.kind == Buffer::Kind::arena && g.residual >= 0 && g.residual != model.output_node() &&
                      !is_alias(nodes[g.residual].layer->spec()) && residual_as_is;
    for (size_t j = 0; j < nodes.size(); ++j)
      for (int src : nodes[j].inputs)
        if (src == g.residual && static_cast<int>(j) != g.add && (!done[j] || is_alias(nodes[j].layer->spec())))
          free_after = false;
    if (free_after) {
      Value shared;
      shared.md = pd.dst_desc();
      shared.buffer = values[res].buffer;
      values.push_back(shared);
      y = static_cast<int>(values.size()) - 1;
    } else {
      y = new_value(pd.dst_desc());
      dnnl::primitive_attr attr = attr_with();
      if (!residual_as_is && sy != sr) cpu::onednn::set_output_scales(attr, 0, {sy / sr});
      const auto copy = dnnl::reorder::primitive_desc(engine, values[res].md, engine, pd.dst_desc(), attr);
      add_step(dnnl::reorder(copy), copy.scratchpad_desc(), {{DNNL_ARG_FROM, res}, {DNNL_ARG_TO, y}}, "residual copy");
    }
  } else {
    y = new_value(pd.dst_desc());
  }
  values[y].range = range_of(g.last);
  const WeightSlot& ws = bind_weights(std::move(slot), pd.weights_desc(), sw, sx);
  std::string what = bn_alone ? "batchnorm as depthwise conv" : "conv " + std::to_string(r) + "x" + std::to_string(s);
  if (g.bn >= 0) what += " +bn";
  if (g.add >= 0) what += " +add";
  if (g.act >= 0) what += " +" + std::string(nodes[g.act].layer->type());
  add_step(dnnl::convolution_forward(pd), pd.scratchpad_desc(),
           {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, -1, ws.weights()}, {DNNL_ARG_BIAS, -1, ws.bias()}, {DNNL_ARG_DST, y}},
           what);
  return y;
}

int InferencePlan::Impl::emit_linear(const Group& g, const std::vector<Model::GraphNode>& nodes,
                                     std::vector<int>& value_of) {
  const auto& head = nodes[g.head];
  const int in = value_of[head.inputs[0] + 1];
  const Dims xd = cpu::onednn::dims_of(values[in].md);  // (N, F) or (N, C, H, W) read as PyTorch's flatten
  const Tensor& w = head.layer->parameters().at(0)->value;  // (O, I)
  const int64_t o = w.dim(0);
  Dims wd{o};
  wd.insert(wd.end(), xd.begin() + 1, xd.end());
  const Md user_w = f32_md(wd, plain_tag(wd.size())), bias = f32_md({o}, Tag::a);
  auto slot = std::make_shared<WeightSlot>(nullptr, nullptr, head.layer, user_w, bias, engine);
  const bool int8 = precision == Precision::int8;
  const Dt src_dt = src_type(in), dst_dt = dst_type(g, nodes, Dt::f32);
  const float sx = quant_scale(src_dt, values[in].range), sy = quant_scale(dst_dt, range_of(g.last));
  const std::vector<float> sw = int8 ? weight_scales(*slot) : std::vector<float>{};
  const bool act_scaled = int8 && g.act >= 0;  // as in emit_conv
  dnnl::post_ops ops;
  if (g.act >= 0) append_activation(ops, *nodes[g.act].layer, act_scaled, sy);
  dnnl::primitive_attr attr = attr_with(ops);
  if (int8) cpu::onednn::set_output_scales(attr, 1 << 1, output_scales(sw, sx, act_scaled ? 1.0f : sy));
  // fp32 reads the activation as it is; other types let oneDNN pick the source's layout.
  const Md src_md = dt_of(in) == src_dt ? values[in].md : Md(xd, src_dt, Tag::any);
  const auto pd = cpu::onednn::inner_product_forward_pd(
      engine, prop_kind::forward_inference, src_md, Md(wd, int8 ? Dt::s8 : compute_type(), Tag::any), &bias,
      Md({batch, o}, dst_dt, Tag::nc), attr);
  const int x = in_format(in, pd.src_desc());
  const int y = new_value(pd.dst_desc());
  values[y].range = range_of(g.last);
  const WeightSlot& ws = bind_weights(std::move(slot), pd.weights_desc(), sw, sx);
  add_step(dnnl::inner_product_forward(pd), pd.scratchpad_desc(),
           {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, -1, ws.weights()}, {DNNL_ARG_BIAS, -1, ws.bias()}, {DNNL_ARG_DST, y}},
           g.act >= 0 ? "linear +" + std::string(nodes[g.act].layer->type()) : "linear");
  return y;
}

// Squeeze-and-excitation's x * s: oneDNN's binary multiply, s (N, C, 1, 1) broadcast over x's
// planes, written in x's format.
int InferencePlan::Impl::emit_mul(const Model::GraphNode& node, const std::vector<Model::GraphNode>& nodes,
                                  std::vector<int>& value_of) {
  if (precision == Precision::int8)
    throw InputError("int8 inference plan: layer '" + node.layer->name() +
                     "' multiplies two tensors outside a convolution, which int8 plans do not support");
  auto shape_of = [&](int i) { return i < 0 ? model.input_shape() : nodes[static_cast<size_t>(i)].shape; };
  const int k = MulSpec::scale_input(shape_of(node.inputs[0]), shape_of(node.inputs[1]));
  CONVOY_CHECK(k >= 0, "inference plan: a mul without a per-channel factor");
  const int x = value_of[node.inputs[1 - k] + 1];
  const Md x_md = values[x].md;  // a copy: new values grow `values`
  const Dims xd = cpu::onednn::dims_of(x_md);  // (N, C, H, W)
  const Dt dt = cpu::onednn::data_type_of(x_md);
  int s = value_of[node.inputs[k] + 1];
  if (cpu::onednn::dims_of(values[s].md).size() == 2) {
    // (N, C): plain, then the same memory seen as (N, C, 1, 1).
    s = in_format(s, Md({xd[0], xd[1]}, dt, Tag::nc));
    Value seen = values[s];
    seen.md = Md({xd[0], xd[1], 1, 1}, dt, Tag::nchw);
    seen.converted.clear();
    values.push_back(seen);
    s = static_cast<int>(values.size()) - 1;
  } else {
    s = in_format(s, Md({xd[0], xd[1], 1, 1}, dt, Tag::nchw));
  }
  const auto pd = cpu::onednn::binary_pd(engine, algorithm::binary_mul, x_md, values[s].md, x_md, attr_with());
  const int y = new_value(x_md);
  values[y].range = values[x].range;
  add_step(dnnl::binary(pd), pd.scratchpad_desc(), {{DNNL_ARG_SRC_0, x}, {DNNL_ARG_SRC_1, s}, {DNNL_ARG_DST, y}},
           "mul (per channel)");
  return y;
}

int InferencePlan::Impl::emit(const Group& g, const std::vector<Model::GraphNode>& nodes, std::vector<int>& value_of) {
  const auto& head = nodes[g.head];
  const LayerSpec spec = head.layer->spec();
  const std::string t(layer_type(spec));  // the step's name
  if (std::holds_alternative<Conv2dSpec>(spec) || std::holds_alternative<BatchNormSpec>(spec))
    return emit_conv(g, nodes, value_of);
  if (std::holds_alternative<LinearSpec>(spec)) return emit_linear(g, nodes, value_of);
  const int in = value_of[head.inputs[0] + 1];
  if (is_alias(spec)) return in;  // flatten keeps the 4-D format: the inner product reads it as PyTorch's order
  const Md x = values[in].md;  // a copy: in_format and new_value grow `values`
  if (is_pool(spec)) {
    const Dims xd = cpu::onednn::dims_of(x);  // (N, C, H, W)
    const auto* window = std::get_if<Pool2dSpec>(&spec);
    const Pool2dParams p = window ? window->params : std::get<GlobalPoolSpec>(spec).window(xd[2], xd[3]);
    const Md any_y({batch, head.shape[0], head.shape[1], head.shape[2]}, dt_of(in), Tag::any);
    const auto pd = cpu::onednn::pool_forward_pd(
        engine, prop_kind::forward_inference,
        p.kind == PoolKind::max ? algorithm::pooling_max : algorithm::pooling_avg_exclude_padding, x, any_y,
        {p.stride_h, p.stride_w}, {p.kernel_h, p.kernel_w}, {p.pad_h, p.pad_w}, {p.pad_h, p.pad_w}, attr_with());
    const int y = new_value(pd.dst_desc());
    values[y].range = values[in].range;  // pooling keeps the scale: a max or mean of it
    add_step(dnnl::pooling_forward(pd), pd.scratchpad_desc(), {{DNNL_ARG_SRC, in}, {DNNL_ARG_DST, y}}, t);
    return y;
  }
  if (const auto* s = std::get_if<ActivationSpec>(&spec)) {
    // oneDNN's eltwise on int8 data computes on the quantized integers: right only for the
    // kinds that commute with a positive scale.
    if (is_int8(cpu::onednn::data_type_of(x)) && s->kind != Activation::relu && s->kind != Activation::leaky_relu)
      throw InputError("int8 inference plan: layer '" + head.layer->name() + "' (" + t +
                       ") runs on int8 values outside a convolution, which int8 plans do not support");
    const cpu::OnednnActivation a = cpu::onednn_activation(s->kind, s->alpha());
    const auto pd =
        cpu::onednn::eltwise_forward_pd(engine, prop_kind::forward_inference, a.alg, x, a.alpha, a.beta, attr_with());
    const int y = new_value(x);
    values[y].range = values[in].range;
    add_step(dnnl::eltwise_forward(pd), pd.scratchpad_desc(), {{DNNL_ARG_SRC, in}, {DNNL_ARG_DST, y}}, t);
    if (!a.affine()) return y;
    // oneDNN's eltwise takes no eltwise post-op: the affine tail (hardsigmoid's) is a step of its own.
    const auto tail = cpu::onednn::eltwise_forward_pd(engine, prop_kind::forward_inference, algorithm::eltwise_linear,
                                                      x, a.scale, a.shift, attr_with());
    const int z = new_value(x);
    values[z].range = values[in].range;
    add_step(dnnl::eltwise_forward(tail), tail.scratchpad_desc(), {{DNNL_ARG_SRC, y}, {DNNL_ARG_DST, z}}, t + " affine");
    return z;
  }
  if (std::holds_alternative<MulSpec>(spec)) return emit_mul(head, nodes, value_of);
  if (std::holds_alternative<SoftmaxSpec>(spec) || std::holds_alternative<UpsampleSpec>(spec)) {
    if (is_int8(dt_of(in)))
      throw InputError("int8 inference plan: layer '" + head.layer->name() + "' (" + t +
                       ") runs on int8 values outside a convolution, which int8 plans do not support");
    if (const auto* up = std::get_if<UpsampleSpec>(&spec)) {
      const Dims xd = cpu::onednn::dims_of(x);  // (N, C, H, W)
      const Md any_y({batch, xd[1], up->out_h(xd[2]), up->out_w(xd[3])}, dt_of(in), Tag::any);
      const auto pd = cpu::onednn::resampling_forward_pd(
          engine, prop_kind::forward_inference,
          up->mode == UpsampleMode::bilinear ? algorithm::resampling_linear : algorithm::resampling_nearest, x, any_y,
          attr_with());
      const int y = new_value(pd.dst_desc());
      values[y].range = values[in].range;  // a convex combination of the input's values
      add_step(dnnl::resampling_forward(pd), pd.scratchpad_desc(), {{DNNL_ARG_SRC, in}, {DNNL_ARG_DST, y}}, t);
      return y;
    }
    // After a flatten (an alias that keeps the 4-D format) the softmax runs over all C x H x W
    // features: read them as plain (N, F).
    int src = in;
    if (head.shape.size() == 1 && cpu::onednn::dims_of(x).size() == 4) {
      const Dims xd = cpu::onednn::dims_of(x);
      const int plain = in_format(in, Md(xd, dt_of(in), Tag::nchw));
      Value flat;
      flat.md = Md({batch, head.shape[0]}, dt_of(in), Tag::nc);
      flat.buffer = values[plain].buffer;
      flat.range = values[plain].range;
      values.push_back(flat);
      src = static_cast<int>(values.size()) - 1;
    }
    const Md md = values[src].md;  // a copy: new_value grows `values`
    const auto pd = cpu::onednn::softmax_forward_pd(engine, prop_kind::forward_inference, md, md, 1, attr_with());
    const int y = new_value(md);
    add_step(cpu::onednn::SoftmaxForward(pd), pd.scratchpad_desc(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, y}}, t);
    return y;
  }
  // An add no convolution could take: copy the first input, then a binary-free sum through a
  // reorder with the sum post-op (dst += src), which oneDNN 2.x and 3.x spell the same way.
  CONVOY_CHECK(std::holds_alternative<AddSpec>(spec), "inference plan: unexpected layer type");
  if (precision == Precision::int8)
    throw InputError("int8 inference plan: layer '" + head.layer->name() +
                     "' adds two tensors outside a convolution, which int8 plans do not support");
  const int b = in_format(value_of[head.inputs[1] + 1], x);
  const int y = new_value(x);
  const auto copy = dnnl::reorder::primitive_desc(engine, x, engine, x, attr_with());
  add_step(dnnl::reorder(copy), copy.scratchpad_desc(), {{DNNL_ARG_FROM, in}, {DNNL_ARG_TO, y}}, "add (copy)");
  dnnl::post_ops sum;
  sum.append_sum(1.0f);
  const auto accumulate = dnnl::reorder::primitive_desc(engine, x, engine, x, attr_with(sum));
  add_step(dnnl::reorder(accumulate), accumulate.scratchpad_desc(), {{DNNL_ARG_FROM, b}, {DNNL_ARG_TO, y}}, "add");
  return y;
}

void InferencePlan::Impl::build() {
  std::vector<Model::GraphNode> nodes = model.graph_nodes();
  const Shape& in = model.input_shape();  // (C, H, W)
  std::vector<int> value_of(nodes.size() + 1, -1);  // by node index + 1; [0] = the model input
  value_of[0] = new_value(f32_md({batch, in[0], in[1], in[2]}, Tag::nchw), Buffer::Kind::input);
  values[0].range = range_of(-1);
  done.assign(nodes.size(), false);
  if (blocked) activations = Tag::aBcd16b;  // PlanLayout::blocked (the constructor chose)
  for (const Group& g : fuse_groups(model, nodes)) {
    value_of[g.last + 1] = emit(g, nodes, value_of);
    for (int j : {g.head, g.bn, g.add, g.act})
      if (j >= 0) done[j] = true;
  }
  // The logits, plain (N, classes), written straight into `output` when the last step makes them so.
  const int last = value_of[model.output_node() + 1];
  const Dims dims = cpu::onednn::dims_of(values[last].md);  // (N, classes), or (N, classes, 1, 1) before a flatten
  node_value = value_of;
  output_value = in_format(last, f32_md(dims, plain_tag(dims.size())));
  Buffer& ob = buffers[values[output_value].buffer];
  if (ob.kind == Buffer::Kind::input) throw InputError("model '" + model.name() + "' computes nothing");
  ob.kind = Buffer::Kind::output;
  output = Tensor::empty({batch, model.num_classes()});
  CONVOY_CHECK(output.nbytes() == ob.bytes, "inference plan: the logits' size");
  place_buffers();
}

}  // namespace convoy
