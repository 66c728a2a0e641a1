// Folding batch norm into the weights before it and reordering them into the primitive's layout.
#include <cmath>
#include <cstring>

#include "engine/core/error.h"
#include "engine/inference/plan_internal.h"

namespace convoy::plan {

namespace {

const Tensor& param(Layer& layer, size_t i) { return layer.parameters().at(i)->value; }

// The layer's bias or nothing.
const float* bias_of(Layer& layer) {
  const auto ps = layer.parameters();
  return ps.size() > 1 ? ps[1]->value.data<float>() : nullptr;
}

}  // namespace

WeightSlot::WeightSlot(Layer* conv, Layer* bn, Layer* linear, const Md& user_md, const Md& want_md,
                       const Md& bias_md, const dnnl::engine& engine)
    : conv_(conv), bn_(bn), linear_(linear), engine_(engine), user_md_(user_md) {
  user_.assign(user_md.get_size() / sizeof(float), 0.0f);
  stored_.assign(want_md.get_size() / sizeof(float) + 1, 0.0f);
  bias_values_.assign(bias_md.get_size() / sizeof(float), 0.0f);
  user_mem_ = dnnl::memory(user_md, engine, user_.data());
  weights_ = dnnl::memory(want_md, engine, stored_.data());
  bias_ = dnnl::memory(bias_md, engine, bias_values_.data());
  reorder_ = dnnl::reorder(user_mem_, weights_);
}

void WeightSlot::refresh(dnnl::stream& stream) {
  const auto k = static_cast<int64_t>(bias_values_.size());  // output channels
  const auto per_k = static_cast<int64_t>(user_.size()) / k;  // weights per output channel
  // Batch norm y = (x - mean) * gamma / sqrt(var + eps) + beta, as scale and shift, in double.
  std::vector<double> scale(static_cast<size_t>(k), 1.0), shift(static_cast<size_t>(k), 0.0);
  if (bn_) {
    const float* gamma = param(*bn_, 0).data<float>();
    const float* beta = param(*bn_, 1).data<float>();
    const auto buffers = bn_->buffers();
    const float* mean = buffers.at(0)->value.data<float>();
    const float* var = buffers.at(1)->value.data<float>();
    const double eps = bn_->spec().eps;
    for (int64_t c = 0; c < k; ++c) {
      scale[c] = gamma[c] / std::sqrt(static_cast<double>(var[c]) + eps);
      shift[c] = beta[c] - mean[c] * scale[c];
    }
  }
  Layer* owner = conv_ ? conv_ : linear_;
  if (owner) {
    const Tensor& w = param(*owner, 0);
    CONVOY_CHECK(w.numel() == static_cast<int64_t>(user_.size()), "inference plan: weight size mismatch");
    const float* src = w.data<float>();
    const float* b = bias_of(*owner);
    for (int64_t o = 0; o < k; ++o) {
      for (int64_t i = 0; i < per_k; ++i)
        user_[o * per_k + i] = static_cast<float>(src[o * per_k + i] * scale[o]);
      bias_values_[o] = static_cast<float>((b ? b[o] : 0.0) * scale[o] + shift[o]);
    }
  } else {  // a batch norm alone: a depthwise 1x1 convolution
    for (int64_t c = 0; c < k; ++c) {
      user_[c] = static_cast<float>(scale[c]);
      bias_values_[c] = static_cast<float>(shift[c]);
    }
  }
  reorder_.execute(stream, user_mem_, weights_);
  stream.wait();
}

}  // namespace convoy::plan
