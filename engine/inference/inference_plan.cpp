// InferencePlan: fusion groups from the model's DAG, one oneDNN primitive per group, buffers
// placed in one arena by lifetime, and run().
#include "engine/inference/inference_plan.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "engine/backends/cpu/onednn_compat.h"
#include "engine/core/error.h"
#include "engine/inference/plan_internal.h"

namespace convoy {

using namespace plan;
using dnnl::algorithm;
using dnnl::prop_kind;

namespace {

// Layers fused into one step: a convolution (or a batch norm alone), its batch norm, a residual
// add and an activation; or a linear layer and its activation; or one other layer.
struct Group {
  int head = -1;      // the first node: conv2d, batchnorm2d, linear, pooling, activation, add, alias
  int bn = -1;        // batchnorm2d folded into the conv
  int add = -1;       // add fused as a sum post-op; `residual` is its other input
  int residual = -2;  // node index, -1 = the model input
  int act = -1;       // activation post-op
  int last = -1;      // the node whose output this group produces
};

}  // namespace

struct InferencePlan::Impl {
  // A tensor of the plan: its memory format and the arena buffer holding it.
  struct Value {
    Md md;
    int buffer = -1;
    std::vector<std::pair<Md, int>> converted;  // the same tensor reordered: (format, value)
  };
  struct Buffer {
    size_t bytes = 0;
    int first = 0, last = 0;  // steps that write it first and read it last
    size_t offset = 0;
    enum class Kind { arena, input, output } kind = Kind::arena;
  };
  struct Arg {
    int arg;
    int value = -1;         // a plan value, or -1 for `fixed`
    dnnl::memory fixed{};   // weights and biases
  };
  struct Step {
    dnnl::primitive prim;
    std::vector<Arg> args;
    std::string what;
    std::unordered_map<int, dnnl::memory> bound;
    std::string impl;  // oneDNN's implementation, e.g. "brgconv:avx512_core"
  };

  Model& model;
  int64_t batch = 0;
  int threads = 1;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::vector<Value> values;
  std::vector<Buffer> buffers;
  std::vector<Step> steps;
  std::vector<std::unique_ptr<WeightSlot>> weights;
  uint64_t weights_version = 0;
  size_t scratch_bytes = 0;
  size_t arena_bytes = 0;
  void* arena = nullptr;
  dnnl::memory scratch;
  Tensor output;  // (batch, classes)
  int output_value = -1;
  std::vector<dnnl::memory*> input_mems;
  std::vector<bool> done;  // while building: the layers whose group has been emitted

  Impl(Model& m, int64_t n, int t) : model(m), batch(n), threads(t) {}
  ~Impl() { std::free(arena); }

  int new_value(const Md& md, Buffer::Kind kind = Buffer::Kind::arena) {
    buffers.push_back({md.get_size(), static_cast<int>(steps.size()), static_cast<int>(steps.size()), 0, kind});
    Value v;
    v.md = md;
    v.buffer = static_cast<int>(buffers.size()) - 1;
    values.push_back(v);
    return static_cast<int>(values.size()) - 1;
  }
  void touch(int value, int step) {
    Buffer& b = buffers[values[value].buffer];
    b.first = std::min(b.first, step);
    b.last = std::max(b.last, step);
  }
  dnnl::primitive_attr attr_with(const dnnl::post_ops& ops = dnnl::post_ops()) const {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    attr.set_post_ops(ops);
    return attr;
  }
  void add_step(dnnl::primitive prim, const Md& scratchpad, std::vector<Arg> args, std::string what) {
    scratch_bytes = std::max(scratch_bytes, scratchpad.get_size());
    const int index = static_cast<int>(steps.size());
    for (const Arg& a : args)
      if (a.value >= 0) touch(a.value, index);
    const char* impl = nullptr;
    dnnl_primitive_desc_query(prim.get_primitive_desc(), dnnl_query_impl_info_str, 0, &impl);
    steps.push_back({std::move(prim), std::move(args), std::move(what), {}, impl ? impl : ""});
  }
  // `value` in format `md`: itself, or a reorder into a new value (made once per format).
  int in_format(int value, const Md& md) {
    if (values[value].md == md) return value;
    for (const auto& [m, v] : values[value].converted)
      if (m == md) return v;
    const auto pd = dnnl::reorder::primitive_desc(engine, values[value].md, engine, md, attr_with());
    const int out = new_value(md);
    add_step(dnnl::reorder(pd), pd.scratchpad_desc(), {{DNNL_ARG_FROM, value}, {DNNL_ARG_TO, out}}, "reorder");
    values[value].converted.emplace_back(md, out);
    return out;
  }

  void build();
  std::vector<Group> fuse(const std::vector<Model::GraphNode>& nodes) const;
  int emit(const Group& g, const std::vector<Model::GraphNode>& nodes, std::vector<int>& value_of);
  int emit_conv(const Group& g, const std::vector<Model::GraphNode>& nodes, std::vector<int>& value_of);
  int emit_linear(const Group& g, const std::vector<Model::GraphNode>& nodes, std::vector<int>& value_of);
  void place_buffers();
  void refresh_weights();
};

std::vector<Group> InferencePlan::Impl::fuse(const std::vector<Model::GraphNode>& nodes) const {
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
  auto type = [&](int i) { return nodes[i].layer->type(); };
  std::vector<Group> groups;
  for (int i = 0; i < n; ++i) {
    if (taken[i]) continue;
    Group g;
    g.head = g.last = i;
    const std::string_view t = type(i);
    if (t == "conv2d") {
      if (int c = sole(g.last); c >= 0 && type(c) == "batchnorm2d") g.bn = g.last = c;
    }
    if (t == "conv2d" || t == "batchnorm2d") {
      if (int c = sole(g.last); c >= 0 && type(c) == "add" && nodes[c].inputs.size() == 2) {
        const int other = nodes[c].inputs[0] == g.last ? nodes[c].inputs[1] : nodes[c].inputs[0];
        if (other != g.last) g.add = c, g.residual = other, g.last = c;
      }
    }
    if (t == "conv2d" || t == "batchnorm2d" || t == "linear") {
      if (int c = sole(g.last); c >= 0 && is_activation(type(c))) g.act = g.last = c;
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

int InferencePlan::Impl::emit_conv(const Group& g, const std::vector<Model::GraphNode>& nodes,
                                   std::vector<int>& value_of) {
  const auto& head = nodes[g.head];
  const bool bn_alone = head.layer->type() == "batchnorm2d";
  const int in = value_of[head.inputs[0] + 1];
  const Dims xd = cpu::onednn::dims_of(values[in].md);  // (N, C, H, W)
  const Shape& out = (g.bn >= 0 ? nodes[g.bn] : head).shape;  // (K, P, Q)
  const int64_t k = out[0], c = xd[1];
  const Conv2dParams p = bn_alone ? Conv2dParams{.groups = c} : head.layer->spec().conv;
  const Tensor& w = bn_alone ? Tensor() : head.layer->parameters().at(0)->value;  // (K, C/g, R, S)
  const int64_t r = bn_alone ? 1 : w.dim(2), s = bn_alone ? 1 : w.dim(3);
  const Md user_w = p.groups == 1 ? f32_md({k, c, r, s}, Tag::oihw)
                                  : f32_md({p.groups, k / p.groups, c / p.groups, r, s}, Tag::goihw);
  const Dims wdims = cpu::onednn::dims_of(user_w);
  const Md any_x = f32_md(xd, Tag::any), any_w = f32_md(wdims, Tag::any), bias = f32_md({k}, Tag::a);
  const Md any_y = f32_md({batch, k, out[1], out[2]}, Tag::any);
  dnnl::post_ops ops;
  if (g.add >= 0) ops.append_sum(1.0f);
  if (g.act >= 0) {
    const LayerSpec a = nodes[g.act].layer->spec();
    cpu::onednn::append_eltwise(ops, eltwise_alg(a.activation), eltwise_alpha(a), 0.0f);
  }
  const auto pd = cpu::onednn::conv_forward_pd(engine, prop_kind::forward_inference, any_x, any_w, &bias, any_y,
                                          {p.stride_h, p.stride_w}, {p.dilation_h - 1, p.dilation_w - 1},
                                          {p.pad_h, p.pad_w}, {p.pad_h, p.pad_w}, attr_with(ops));
  const int x = in_format(in, pd.src_desc());
  int y = -1;
  if (g.add >= 0) {
    const int res = value_of[g.residual + 1];
    const Buffer& rb = buffers[values[res].buffer];
    // Sum post-op: the destination holds the residual before the convolution adds to it. Take
    // over the residual's buffer when every other reader ran before this step (a ResNet block's
    // first convolution reads the identity shortcut first), else copy it.
    bool free_after = rb.kind == Buffer::Kind::arena && g.residual >= 0 && g.residual != model.output_node() &&
                      !is_alias(nodes[g.residual].layer->type()) && values[res].md == pd.dst_desc();
    for (size_t j = 0; j < nodes.size(); ++j)
      for (int src : nodes[j].inputs)
        if (src == g.residual && static_cast<int>(j) != g.add && (!done[j] || is_alias(nodes[j].layer->type())))
          free_after = false;
    if (free_after) {
      Value shared;
      shared.md = pd.dst_desc();
      shared.buffer = values[res].buffer;
      values.push_back(shared);
      y = static_cast<int>(values.size()) - 1;
    } else {
      y = new_value(pd.dst_desc());
      const auto copy = dnnl::reorder::primitive_desc(engine, values[res].md, engine, pd.dst_desc(), attr_with());
      add_step(dnnl::reorder(copy), copy.scratchpad_desc(), {{DNNL_ARG_FROM, res}, {DNNL_ARG_TO, y}}, "residual copy");
    }
  } else {
    y = new_value(pd.dst_desc());
  }
  weights.push_back(std::make_unique<WeightSlot>(bn_alone ? nullptr : head.layer,
                                                 bn_alone ? head.layer : (g.bn >= 0 ? nodes[g.bn].layer : nullptr),
                                                 nullptr, user_w, pd.weights_desc(), bias, engine));
  const WeightSlot& ws = *weights.back();
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
  dnnl::post_ops ops;
  if (g.act >= 0) {
    const LayerSpec a = nodes[g.act].layer->spec();
    cpu::onednn::append_eltwise(ops, eltwise_alg(a.activation), eltwise_alpha(a), 0.0f);
  }
  const auto pd = cpu::onednn::inner_product_forward_pd(engine, prop_kind::forward_inference, values[in].md,
                                                   f32_md(wd, Tag::any), &bias, f32_md({batch, o}, Tag::nc),
                                                   attr_with(ops));
  const int x = in_format(in, pd.src_desc());
  const int y = new_value(pd.dst_desc());
  weights.push_back(std::make_unique<WeightSlot>(nullptr, nullptr, head.layer, user_w, pd.weights_desc(), bias, engine));
  const WeightSlot& ws = *weights.back();
  add_step(dnnl::inner_product_forward(pd), pd.scratchpad_desc(),
           {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, -1, ws.weights()}, {DNNL_ARG_BIAS, -1, ws.bias()}, {DNNL_ARG_DST, y}},
           g.act >= 0 ? "linear +" + std::string(nodes[g.act].layer->type()) : "linear");
  return y;
}

int InferencePlan::Impl::emit(const Group& g, const std::vector<Model::GraphNode>& nodes, std::vector<int>& value_of) {
  const auto& head = nodes[g.head];
  const std::string_view t = head.layer->type();
  if (t == "conv2d" || t == "batchnorm2d") return emit_conv(g, nodes, value_of);
  if (t == "linear") return emit_linear(g, nodes, value_of);
  const int in = value_of[head.inputs[0] + 1];
  if (is_alias(t)) return in;  // flatten keeps the 4-D format: the inner product reads it as PyTorch's order
  const Md& x = values[in].md;
  if (is_pool(t)) {
    const Pool2dParams p = head.layer->spec().pool;
    const Md any_y = f32_md({batch, head.shape[0], head.shape[1], head.shape[2]}, Tag::any);
    const auto pd = cpu::onednn::pool_forward_pd(
        engine, prop_kind::forward_inference,
        p.kind == PoolKind::max ? algorithm::pooling_max : algorithm::pooling_avg_exclude_padding, x, any_y,
        {p.stride_h, p.stride_w}, {p.kernel_h, p.kernel_w}, {p.pad_h, p.pad_w}, {p.pad_h, p.pad_w}, attr_with());
    const int y = new_value(pd.dst_desc());
    add_step(dnnl::pooling_forward(pd), pd.scratchpad_desc(), {{DNNL_ARG_SRC, in}, {DNNL_ARG_DST, y}}, std::string(t));
    return y;
  }
  if (is_activation(t)) {
    const LayerSpec a = head.layer->spec();
    const auto pd = cpu::onednn::eltwise_forward_pd(engine, prop_kind::forward_inference, eltwise_alg(a.activation), x,
                                               eltwise_alpha(a), 0.0f, attr_with());
    const int y = new_value(x);
    add_step(dnnl::eltwise_forward(pd), pd.scratchpad_desc(), {{DNNL_ARG_SRC, in}, {DNNL_ARG_DST, y}}, std::string(t));
    return y;
  }
  // An add no convolution could take: copy the first input, then a binary-free sum through a
  // reorder with the sum post-op (dst += src), which oneDNN 2.x and 3.x spell the same way.
  CONVOY_CHECK(t == "add", "inference plan: unexpected layer type");
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
  done.assign(nodes.size(), false);
  for (const Group& g : fuse(nodes)) {
    value_of[g.last + 1] = emit(g, nodes, value_of);
    for (int j : {g.head, g.bn, g.add, g.act})
      if (j >= 0) done[j] = true;
  }
  // The logits, plain (N, classes), written straight into `output` when the last step makes them so.
  const int last = value_of[model.output_node() + 1];
  const Dims dims = cpu::onednn::dims_of(values[last].md);  // (N, classes), or (N, classes, 1, 1) before a flatten
  output_value = in_format(last, f32_md(dims, plain_tag(dims.size())));
  Buffer& ob = buffers[values[output_value].buffer];
  if (ob.kind == Buffer::Kind::input) throw InputError("model '" + model.name() + "' computes nothing");
  ob.kind = Buffer::Kind::output;
  output = Tensor::empty({batch, model.num_classes()});
  CONVOY_CHECK(output.nbytes() == ob.bytes, "inference plan: the logits' size");
  place_buffers();
}

// Greedy placement, largest first, at the lowest offset clear of every placed buffer whose
// lifetime overlaps; the scratchpad (shared by all steps, which run one at a time) goes first.
void InferencePlan::Impl::place_buffers() {
  std::vector<int> order;
  for (int i = 0; i < static_cast<int>(buffers.size()); ++i)
    if (buffers[i].kind == Buffer::Kind::arena) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return buffers[a].bytes > buffers[b].bytes; });
  const size_t scratch_end = (scratch_bytes + kAlign - 1) / kAlign * kAlign;
  std::vector<int> placed;
  size_t end = scratch_end;
  for (int i : order) {
    Buffer& b = buffers[i];
    std::vector<std::pair<size_t, size_t>> busy;
    for (int j : placed)
      if (buffers[j].first <= b.last && b.first <= buffers[j].last)
        busy.emplace_back(buffers[j].offset, buffers[j].offset + buffers[j].bytes);
    std::sort(busy.begin(), busy.end());
    size_t offset = scratch_end;
    for (const auto& [lo, hi] : busy) {
      if (offset + b.bytes <= lo) break;
      offset = std::max(offset, (hi + kAlign - 1) / kAlign * kAlign);
    }
    b.offset = offset;
    end = std::max(end, offset + b.bytes);
    placed.push_back(i);
  }
  arena_bytes = std::max<size_t>(end, kAlign);
  arena = std::aligned_alloc(kAlign, (arena_bytes + kAlign - 1) / kAlign * kAlign);
  if (!arena) throw OutOfMemoryError("inference plan: cannot allocate its " + std::to_string(arena_bytes) + "-byte arena");
  auto* base = static_cast<char*>(arena);
  scratch = dnnl::memory(f32_md({static_cast<int64_t>(std::max<size_t>(scratch_bytes, 4) / 4)}, Tag::a), engine, base);
  for (Step& s : steps) {
    for (const Arg& a : s.args) {
      if (a.value < 0) {
        s.bound.emplace(a.arg, a.fixed);
        continue;
      }
      const Value& v = values[a.value];
      const Buffer& b = buffers[v.buffer];
      void* ptr = b.kind == Buffer::Kind::output ? output.raw() : b.kind == Buffer::Kind::input ? nullptr : base + b.offset;
      s.bound.emplace(a.arg, dnnl::memory(v.md, engine, ptr ? ptr : DNNL_MEMORY_NONE));
      if (b.kind == Buffer::Kind::input) input_mems.push_back(&s.bound.at(a.arg));
    }
    if (scratch_bytes) s.bound.emplace(DNNL_ARG_SCRATCHPAD, scratch);
  }
}

void InferencePlan::Impl::refresh_weights() {
  ThreadScope scope(threads);
  for (auto& w : weights) w->refresh(stream);
  weights_version = model.weights_version();
}

std::string InferencePlan::unsupported_reason(Model& model) {
  for (const Model::GraphNode& n : model.graph_nodes()) {
    const std::string_view t = n.layer->type();
    if (!is_known(t)) return "layer '" + n.layer->name() + "' (" + std::string(t) + ") has no inference plan";
    if (t == "add" && n.inputs.size() != 2) return "layer '" + n.layer->name() + "' adds more than two inputs";
    for (Parameter* p : n.layer->parameters())
      if (!p->value.device().is_cpu() || p->value.dtype() != DType::f32) return "weights are not f32 on the CPU";
    for (Buffer* b : n.layer->buffers())
      if (!b->value.device().is_cpu() || b->value.dtype() != DType::f32) return "buffers are not f32 on the CPU";
  }
  return "";
}

InferencePlan::InferencePlan(Model& model, int64_t batch, const InferenceOptions& options) {
  if (batch < 1) throw InputError("inference plan: batch must be positive, got " + std::to_string(batch));
  if (const std::string why = unsupported_reason(model); !why.empty())
    throw InputError("model '" + model.name() + "': " + why);
  int threads = options.threads > 0 ? options.threads : omp_get_max_threads();
  if (options.threads == 0 && options.single_thread_below_flops > 0 &&
      model.forward_flops() * batch < options.single_thread_below_flops)
    threads = 1;
  impl_ = std::make_unique<Impl>(model, batch, threads);
  try {
    ThreadScope scope(threads);  // oneDNN partitions its work for the team it is built under
    impl_->build();
  } catch (const dnnl::error& e) {
    throw DeviceError("inference plan for model '" + model.name() + "': oneDNN: " + e.what());
  }
  impl_->refresh_weights();
}

InferencePlan::~InferencePlan() = default;

const Tensor& InferencePlan::run(const Tensor& x) {
  Impl& m = *impl_;
  const Shape& in = m.model.input_shape();
  if (x.shape() != Shape{m.batch, in[0], in[1], in[2]} || x.dtype() != DType::f32 || !x.device().is_cpu() ||
      x.layout() != Layout::nchw)
    throw InputError("inference plan for model '" + m.model.name() + "' takes f32 nchw " +
                     shape_str({m.batch, in[0], in[1], in[2]}) + " on the CPU, got " + shape_str(x.shape()));
  if (m.model.weights_version() != m.weights_version) m.refresh_weights();
  ThreadScope scope(m.threads);
  for (dnnl::memory* mem : m.input_mems) mem->set_data_handle(const_cast<void*>(x.raw()));
  try {
    for (Impl::Step& s : m.steps) s.prim.execute(m.stream, s.bound);
    m.stream.wait();
  } catch (const dnnl::error& e) {
    throw DeviceError("inference plan for model '" + m.model.name() + "': oneDNN: " + e.what());
  }
  return m.output;
}

int64_t InferencePlan::batch() const { return impl_->batch; }
int InferencePlan::threads() const { return impl_->threads; }
size_t InferencePlan::arena_bytes() const { return impl_->arena_bytes; }
size_t InferencePlan::primitive_count() const { return impl_->steps.size(); }

std::string InferencePlan::describe() const {
  std::ostringstream out;
  for (const Impl::Step& s : impl_->steps) {
    out << s.what << " [" << s.impl << "]";
    if (s.bound.count(DNNL_ARG_SRC)) out << " src " << format_of(s.bound.at(DNNL_ARG_SRC).get_desc());
    if (s.bound.count(DNNL_ARG_DST)) out << " dst " << format_of(s.bound.at(DNNL_ARG_DST).get_desc());
    out << "\n";
  }
  return out.str();
}

}  // namespace convoy
