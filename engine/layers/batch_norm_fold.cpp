#include "engine/layers/batch_norm_fold.h"

#include <cmath>
#include <variant>

#include "engine/core/error.h"

namespace convoy {

BatchNormAffine batch_norm_affine(Layer& bn) {
  const LayerSpec spec = bn.spec();
  const auto* s = std::get_if<BatchNormSpec>(&spec);
  CONVOY_CHECK(s != nullptr, "batch_norm_affine: '" + bn.name() + "' is not a batch norm");
  const std::vector<Parameter*> params = bn.parameters();
  const std::vector<Buffer*> buffers = bn.buffers();
  const std::vector<float> gamma = params.at(0)->value.to_floats(), beta = params.at(1)->value.to_floats(),
                           mean = buffers.at(0)->value.to_floats(), var = buffers.at(1)->value.to_floats();
  BatchNormAffine a;
  a.scale.resize(gamma.size());
  a.shift.resize(gamma.size());
  for (size_t c = 0; c < gamma.size(); ++c) {
    a.scale[c] = gamma[c] / std::sqrt(static_cast<double>(var[c]) + s->eps);
    a.shift[c] = beta[c] - mean[c] * a.scale[c];
  }
  return a;
}

void fold_batch_norm(const BatchNormAffine& bn, std::vector<float>& weight, std::vector<float>& bias) {
  const size_t k = bn.scale.size();
  CONVOY_CHECK(k > 0 && bias.size() == k && weight.size() % k == 0,
               "fold_batch_norm: " + std::to_string(weight.size()) + " weights and " + std::to_string(bias.size()) +
                   " biases for " + std::to_string(k) + " channels");
  const size_t per_channel = weight.size() / k;
  for (size_t o = 0; o < k; ++o) {
    for (size_t j = 0; j < per_channel; ++j)
      weight[o * per_channel + j] = static_cast<float>(weight[o * per_channel + j] * bn.scale[o]);
    bias[o] = static_cast<float>(bias[o] * bn.scale[o] + bn.shift[o]);
  }
}

}  // namespace convoy
