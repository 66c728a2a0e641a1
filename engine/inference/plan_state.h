#pragma once
// InferencePlan's state (InferencePlan::Impl: its fused groups, values, arena buffers and
// steps), shared by the builder (inference_plan.cpp) and placement, run and calibration
// (plan_run.cpp). The oneDNN helpers and weight slots under it are plan_internal.h's.
// Internal to engine/inference.
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/inference/fuse_groups.h"
#include "engine/inference/inference_plan.h"
#include "engine/inference/plan_internal.h"

namespace convoy {

namespace plan {
// Whether a plan of `model` at `batch` runs any convolution as Winograd (fp32, AVX-512).
bool runs_winograd(Model& model, int64_t batch, const InferenceOptions& options);
}  // namespace plan

using namespace plan;


struct InferencePlan::Impl {
  // A tensor of the plan: its memory format and the arena buffer holding it.
  struct Value {
    Md md;
    int buffer = -1;
    float range = 0;  // int8: the calibrated largest |value| (its quantization scale's base)
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
  Precision precision = Precision::fp32;
  std::vector<float> act_max;   // int8: by node index + 1, [0] = the model input
  std::vector<int> node_value;  // the value of each node's output, by node index + 1
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::vector<Value> values;
  std::vector<Buffer> buffers;
  std::vector<Step> steps;
  std::vector<std::shared_ptr<WeightSlot>> weights;
  std::shared_ptr<PlanSharing> sharing;  // weights and arena shared with the model's other plans, or null
  uint64_t weights_version = 0;
  size_t scratch_bytes = 0;
  size_t arena_bytes = 0;
  void* arena = nullptr;  // owned; null where the arena is shared
  dnnl::memory scratch;
  Tensor output;  // (batch, classes)
  int output_value = -1;
  std::vector<dnnl::memory*> input_mems;
  std::vector<bool> done;  // while building: the layers whose group has been emitted
  Tag activations = Tag::any;  // the fp32 activations' format for the convolutions (build)
  bool blocked = false;        // PlanLayout::blocked: nChw16c throughout
  bool winograd = true;        // InferenceOptions::winograd

  Impl(Model& m, int64_t n, int t, const InferenceOptions& o, bool nchw16c)
      : model(m), batch(n), threads(t), precision(o.precision), act_max(o.activation_max),
        sharing(o.sharing), blocked(nchw16c), winograd(o.winograd) {}
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
  // `value` in format `md`: itself, or a reorder into a new value (made once per format). A
  // change of data type into or out of int8 rescales by the value's quantization scale.
  int in_format(int value, const Md& md) {
    if (values[value].md == md) return value;
    for (const auto& [m, v] : values[value].converted)
      if (m == md) return v;
    dnnl::primitive_attr attr = attr_with();
    const float range = values[value].range;
    const float scale = quant_scale(cpu::onednn::data_type_of(md), range) /
                        quant_scale(cpu::onednn::data_type_of(values[value].md), range);
    if (scale != 1.0f) cpu::onednn::set_output_scales(attr, 0, {scale});
    const auto pd = dnnl::reorder::primitive_desc(engine, values[value].md, engine, md, attr);
    const int out = new_value(md);
    values[out].range = range;
    add_step(dnnl::reorder(pd), pd.scratchpad_desc(), {{DNNL_ARG_FROM, value}, {DNNL_ARG_TO, out}}, "reorder");
    values[value].converted.emplace_back(md, out);
    return out;
  }
  // `slot` bound to the primitive's layout, or the same weights in that layout that another plan
  // of the model already holds; this plan keeps it.
  const WeightSlot& bind_weights(std::shared_ptr<WeightSlot> slot, const Md& want, std::vector<float> weight_scale,
                                 float src_scale) {
    std::shared_ptr<WeightSlot> held;
    if (sharing && weight_scale.empty()) held = sharing->find(slot->conv(), slot->bn(), slot->linear(), want);
    if (!held) {
      slot->bind(want, std::move(weight_scale), src_scale);
      held = std::move(slot);
      if (sharing) sharing->add(held);  // int8 slots too: counted, never found by another plan
    }
    weights.push_back(held);
    return *held;
  }
  // The calibrated range of node n's output (-1: the model input); 0 unless int8.
  float range_of(int n) const {
    return precision == Precision::int8 ? act_max.at(static_cast<size_t>(n + 1)) : 0.0f;
  }
  // The data type convolutions and inner products read and write between layers.
  Dt compute_type() const {
    return precision == Precision::bf16 ? Dt::bf16 : precision == Precision::int8 ? Dt::s8 : Dt::f32;
  }
  // What a convolution or inner product reads `value` as: int8 keeps u8 or s8 as it comes.
  Dt src_type(int value) const {
    const Dt t = cpu::onednn::data_type_of(values[value].md);
    return precision == Precision::int8 && is_int8(t) ? t : compute_type();
  }
  Dt dt_of(int value) const { return cpu::onednn::data_type_of(values[value].md); }

  Dt dst_type(const Group& g, const std::vector<Model::GraphNode>& nodes, Dt residual) const;
  void build();
  int emit(const Group& g, const std::vector<Model::GraphNode>& nodes, std::vector<int>& value_of);
  int emit_conv(const Group& g, const std::vector<Model::GraphNode>& nodes, std::vector<int>& value_of);
  int emit_linear(const Group& g, const std::vector<Model::GraphNode>& nodes, std::vector<int>& value_of);
  int emit_mul(const Model::GraphNode& node, const std::vector<Model::GraphNode>& nodes, std::vector<int>& value_of);
  void place_buffers();
  void refresh_weights();
};

}  // namespace convoy
