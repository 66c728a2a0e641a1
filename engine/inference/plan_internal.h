#pragma once
// What inference_plan.cpp (the builder and run) and plan_weights.cpp (folding and reordering
// the weights) share. Internal to engine/inference.
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/backends/cpu/onednn_activation.h"
#include "engine/backends/cpu/onednn_compat.h"
#include "engine/layers/layer.h"

namespace convoy::plan {

using Md = dnnl::memory::desc;
using Dims = dnnl::memory::dims;
using Tag = dnnl::memory::format_tag;

using Dt = dnnl::memory::data_type;

inline Md f32_md(const Dims& dims, Tag tag) { return Md(dims, Dt::f32, tag); }
// Whether oneDNN's kernels here have `want`: its ISA values are bit sets, each containing the
// ones it extends (AMX contains AVX-512 BF16, which contains AVX-512).
inline bool cpu_has(dnnl::cpu_isa want) {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  return (isa & static_cast<unsigned>(want)) == static_cast<unsigned>(want);
}
inline bool is_int8(Dt t) { return t == Dt::s8 || t == Dt::u8; }
// The quantized step of a value of range `max` in type t: q = x * scale (1 for float types).
inline float quant_scale(Dt t, float max) {
  if (!is_int8(t)) return 1.0f;
  return (t == Dt::u8 ? 255.0f : 127.0f) / std::max(max, 1e-12f);
}

inline constexpr size_t kAlign = 64;
// An arena of `bytes` (at least kAlign) at a kAlign boundary, or nullptr; freed with std::free.
inline void* alloc_arena(size_t bytes) {
  return std::aligned_alloc(kAlign, (std::max(bytes, kAlign) + kAlign - 1) / kAlign * kAlign);
}

inline bool is_activation(const LayerSpec& s) { return std::holds_alternative<ActivationSpec>(s); }
inline bool is_pool(const LayerSpec& s) {
  return std::holds_alternative<Pool2dSpec>(s) || std::holds_alternative<GlobalPoolSpec>(s);
}
// Layers whose output is their input's memory (dropout: in evaluation).
inline bool is_alias(const LayerSpec& s) {
  return std::holds_alternative<FlattenSpec>(s) || std::holds_alternative<DropoutSpec>(s);
}
// Whether the plan has a step for the layer (the others run layer by layer). Every spec type is
// named, so that a new layer type does not compile until it is decided here.
inline bool is_known(const LayerSpec& spec) {
  return std::visit(Overloaded{[](const Conv2dSpec&) { return true; }, [](const BatchNormSpec&) { return true; },
                               [](const LinearSpec&) { return true; }, [](const ActivationSpec&) { return true; },
                               [](const Pool2dSpec&) { return true; }, [](const GlobalPoolSpec&) { return true; },
                               [](const FlattenSpec&) { return true; }, [](const DropoutSpec&) { return true; },
                               [](const AddSpec&) { return true; }, [](const ConcatSpec&) { return false; },
                               [](const MulSpec&) { return true; }, [](const SoftmaxSpec&) { return true; },
                               [](const UpsampleSpec&) { return true; }},
                    spec);
}

// "nchw", "nhwc", "plain", or the inner blocks, e.g. "blocked 16" (nChw16c).
inline std::string format_of(const Md& md) {
  const Dims blocks = cpu::onednn::inner_blocks(md);
  if (blocks.empty()) {
    const Dims st = cpu::onednn::strides_of(md);
    if (st.size() == 4 && st[1] == 1 && st[3] > 1) return "nhwc";
    if (st.size() == 4 && st[3] == 1) return "nchw";
    return "plain";
  }
  std::string s = "blocked";
  for (int64_t b : blocks) s += " " + std::to_string(b);
  return s;
}

inline Tag plain_tag(size_t rank) { return rank == 4 ? Tag::nchw : rank == 2 ? Tag::nc : Tag::a; }

// OpenMP's thread count for the primitives built and run in this scope, restored after.
class ThreadScope {
 public:
  explicit ThreadScope(int threads) : previous_(omp_get_max_threads()) { omp_set_num_threads(threads); }
  ~ThreadScope() { omp_set_num_threads(previous_); }
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int previous_;
};

// The weights of one convolution or inner product step, in the layout its primitive wants:
// a convolution with the batch norm after it folded in, a batch norm alone as a depthwise 1x1
// convolution, or a linear layer. For int8 the folded weights become s8 with one symmetric scale
// per output channel, fixed when the slot is bound, and the bias moves to the accumulator's scale.
// Only the reordered copy is kept: the folded f32 copy in the model's layout lives from the fold
// to the reorder.
class WeightSlot {
 public:
  // conv: the conv2d layer or nullptr (a batch norm alone); bn: the batchnorm2d folded in or
  // nullptr; linear: the linear layer (then conv and bn are nullptr). user_md: the f32 weights as
  // the model holds them ((K, C/g, R, S) oihw, (G, K/G, C/G, R, S) goihw, (O, I) or (O, C, H, W));
  // bias_md: (K). Folds the weights at once (channel_max() reads them).
  WeightSlot(Layer* conv, Layer* bn, Layer* linear, const Md& user_md, const Md& bias_md, const dnnl::engine& engine);

  // The largest |folded weight| of each output channel (K).
  std::vector<float> channel_max() const;
  // want_md: the primitive's weights_desc(). For s8 weights: weight_scale (K) quantizes each
  // channel (q = w * scale) and src_scale is the input's, so the bias becomes bias * src * weight.
  void bind(const Md& want_md, std::vector<float> weight_scale = {}, float src_scale = 1.0f);

  // Recomputes the folded weights from the layers and reorders them into the primitive's layout,
  // unless they are already those of the model's `weights_version` (a slot shared by plans).
  void refresh(uint64_t weights_version);

  const dnnl::memory& weights() const { return weights_; }
  const dnnl::memory& bias() const { return bias_; }
  // What this slot is the weights of, and how they are laid out: plans that want the same share it.
  const Layer* conv() const { return conv_; }
  const Layer* bn() const { return bn_; }
  const Layer* linear() const { return linear_; }
  bool shareable() const { return weight_scale_.empty(); }  // int8 scales are their plan's
  bool same_as(const Layer* conv, const Layer* bn, const Layer* linear, const Md& want_md) const {
    return conv == conv_ && bn == bn_ && linear == linear_ && shareable() && want_md == weights_.get_desc();
  }
  size_t bytes() const { return stored_.size() * sizeof(float) + user_s8_.size() + bias_values_.size() * sizeof(float); }

 private:
  void fold();

  Layer* conv_;
  Layer* bn_;
  Layer* linear_;
  dnnl::engine engine_;
  Md user_md_;
  std::vector<float> user_;    // folded weights in the model's layout, between fold and reorder
  std::vector<int8_t> user_s8_;  // the same quantized (int8 only)
  std::vector<float> stored_;  // in the primitive's layout (padded blocks and s8 compensation included)
  std::vector<float> folded_bias_;  // (K)
  std::vector<float> bias_values_;  // (K) as the primitive adds it
  std::vector<float> weight_scale_;  // (K), int8 only
  float src_scale_ = 1.0f;
  std::optional<uint64_t> version_;  // the model's weights_version the stored copy holds
  dnnl::memory user_mem_, weights_, bias_;
  dnnl::reorder reorder_;
};

// What the plans of one model that run one at a time (a server instance's batch sizes) share:
// the weight slots bound to the same layers in the same layout (fp32 and bf16; int8 slots carry
// their plan's scales and stay its own, though held and counted here too), and one arena for
// their activations and scratchpads.
class PlanSharing {
 public:
  std::shared_ptr<WeightSlot> find(const Layer* conv, const Layer* bn, const Layer* linear, const Md& want_md) const {
    for (const auto& slot : slots_)
      if (slot->same_as(conv, bn, linear, want_md)) return slot;
    return nullptr;
  }
  void add(std::shared_ptr<WeightSlot> slot) { slots_.push_back(std::move(slot)); }
  // An arena of at least `bytes`: the largest one so far where it is large enough, else a new one
  // (the plans built on the older ones keep theirs: build the largest plan first).
  void* arena(size_t bytes) {
    if (arenas_.empty() || arena_bytes_.back() < bytes) {
      void* p = alloc_arena(bytes);
      if (!p) return nullptr;
      arenas_.emplace_back(p, &std::free);
      arena_bytes_.push_back(bytes);
    }
    return arenas_.back().get();
  }
  size_t bytes() const {
    size_t n = 0;
    for (const auto& slot : slots_) n += slot->bytes();
    for (size_t b : arena_bytes_) n += b;
    return n;
  }

 private:
  std::vector<std::shared_ptr<WeightSlot>> slots_;
  std::vector<std::unique_ptr<void, decltype(&std::free)>> arenas_;
  std::vector<size_t> arena_bytes_;
};

}  // namespace convoy::plan
