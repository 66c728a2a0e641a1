#pragma once
// What inference_plan.cpp (the builder and run) and plan_weights.cpp (folding and reordering
// the weights) share. Internal to engine/inference.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <vector>

#include "engine/layers/layer.h"

namespace convoy::plan {

using Md = dnnl::memory::desc;
using Dims = dnnl::memory::dims;
using Tag = dnnl::memory::format_tag;

inline Md f32_md(const Dims& dims, Tag tag) { return Md(dims, dnnl::memory::data_type::f32, tag); }

// The weights of one convolution or inner product step, in the layout its primitive wants:
// a convolution with the batch norm after it folded in, a batch norm alone as a depthwise 1x1
// convolution, or a linear layer.
class WeightSlot {
 public:
  // conv: the conv2d layer or nullptr (a batch norm alone); bn: the batchnorm2d folded in or
  // nullptr; linear: the linear layer (then conv and bn are nullptr). user_md: the weights as
  // the model holds them ((K, C/g, R, S) oihw, (G, K/G, C/G, R, S) goihw, (O, I) or (O, C, H, W));
  // want_md: the primitive's weights_desc(); bias_md: (K).
  WeightSlot(Layer* conv, Layer* bn, Layer* linear, const Md& user_md, const Md& want_md, const Md& bias_md,
             const dnnl::engine& engine);

  // Recomputes the folded weights from the layers and reorders them into the primitive's layout.
  void refresh(dnnl::stream& stream);

  const dnnl::memory& weights() const { return weights_; }
  const dnnl::memory& bias() const { return bias_; }

 private:
  Layer* conv_;
  Layer* bn_;
  Layer* linear_;
  dnnl::engine engine_;
  Md user_md_;
  std::vector<float> user_;    // folded weights in the model's layout
  std::vector<float> stored_;  // in the primitive's layout (padded blocks included)
  std::vector<float> bias_values_;  // (K)
  dnnl::memory user_mem_, weights_, bias_;
  dnnl::reorder reorder_;
};

}  // namespace convoy::plan
