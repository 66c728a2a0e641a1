// Folding batch norm into the weights before it and reordering them into the primitive's layout.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/core/error.h"
#include "engine/inference/plan_internal.h"
#include "engine/layers/batch_norm_fold.h"

namespace convoy::plan {

namespace {

const Tensor& param(Layer& layer, size_t i) { return layer.parameters().at(i)->value; }

// The layer's bias or nothing.
const float* bias_of(Layer& layer) {
  const auto ps = layer.parameters();
  return ps.size() > 1 ? ps[1]->value.data<float>() : nullptr;
}

}  // namespace

WeightSlot::WeightSlot(Layer* conv, Layer* bn, Layer* linear, const Md& user_md, const Md& bias_md,
                       const dnnl::engine& engine)
    : conv_(conv), bn_(bn), linear_(linear), engine_(engine), user_md_(user_md) {
  folded_bias_.assign(bias_md.get_size() / sizeof(float), 0.0f);
  bias_values_ = folded_bias_;
  bias_ = dnnl::memory(bias_md, engine, bias_values_.data());
  fold();
}

std::vector<float> WeightSlot::channel_max() const {
  const size_t k = folded_bias_.size(), per_k = user_.size() / k;
  std::vector<float> out(k, 0.0f);
  for (size_t o = 0; o < k; ++o)
    for (size_t i = 0; i < per_k; ++i) out[o] = std::max(out[o], std::fabs(user_[o * per_k + i]));
  return out;
}

void WeightSlot::bind(const Md& want_md, std::vector<float> weight_scale, float src_scale) {
  weight_scale_ = std::move(weight_scale);
  src_scale_ = src_scale;
  stored_.assign(want_md.get_size() / sizeof(float) + 1, 0.0f);
  weights_ = dnnl::memory(want_md, engine_, stored_.data());
  if (weight_scale_.empty()) {
    user_mem_ = dnnl::memory(user_md_, engine_, DNNL_MEMORY_NONE);  // user_'s, at each refresh
  } else {
    // The s8 weights in the model's layout; the reorder adds the compensation oneDNN wants.
    user_s8_.assign(user_.size(), 0);
    const Dims dims = cpu::onednn::dims_of(user_md_);
    const Md s8_md(dims, Dt::s8, dims.size() == 5 ? Tag::goihw : plain_tag(dims.size()));
    user_mem_ = dnnl::memory(s8_md, engine_, user_s8_.data());
  }
  reorder_ = dnnl::reorder(user_mem_, weights_);
}

void WeightSlot::fold() {
  const size_t k = folded_bias_.size();  // output channels
  const size_t size = user_md_.get_size() / sizeof(float);
  if (Layer* owner = conv_ ? conv_ : linear_) {
    const Tensor& w = param(*owner, 0);
    CONVOY_CHECK(w.numel() == static_cast<int64_t>(size), "inference plan: weight size mismatch");
    user_.assign(w.data<float>(), w.data<float>() + size);
    const float* b = bias_of(*owner);
    folded_bias_ = b ? std::vector<float>(b, b + k) : std::vector<float>(k, 0.0f);
  } else {  // a batch norm alone: a depthwise 1x1 convolution, the identity before the fold
    user_.assign(size, 1.0f);
    folded_bias_.assign(k, 0.0f);
  }
  if (bn_) fold_batch_norm(batch_norm_affine(*bn_), user_, folded_bias_);
}

void WeightSlot::refresh(uint64_t weights_version) {
  if (version_ == weights_version) return;
  fold();
  const size_t k = folded_bias_.size(), per_k = user_.size() / k;
  if (weight_scale_.empty()) {
    bias_values_ = folded_bias_;
  } else {
    // Round to nearest, clamped: changed weights keep the scales the plan was built with.
    for (size_t o = 0; o < k; ++o) {
      for (size_t i = 0; i < per_k; ++i)
        user_s8_[o * per_k + i] =
            static_cast<int8_t>(std::clamp(std::nearbyint(user_[o * per_k + i] * weight_scale_[o]), -127.0f, 127.0f));
      // oneDNN 2.x adds the bias to the int32 accumulator before the output scale.
      bias_values_[o] = folded_bias_[o] * src_scale_ * weight_scale_[o];
    }
  }
  if (weight_scale_.empty()) user_mem_.set_data_handle(user_.data());
  dnnl::stream stream(engine_);  // the engine it was bound on, which may be another plan's
  reorder_.execute(stream, user_mem_, weights_);
  stream.wait();
  std::vector<float>().swap(user_);
  version_ = weights_version;
}

}  // namespace convoy::plan
