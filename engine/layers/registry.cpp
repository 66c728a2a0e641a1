#include "engine/layers/registry.h"

#include <cmath>
#include <utility>

#include "engine/core/error.h"

namespace convoy {

namespace {

using Factory = std::unique_ptr<Layer> (*)(const std::string&, const YamlMap&);

// The one list of layer types: registering a layer is one line here.
const std::vector<std::pair<std::string, Factory>>& registry() {
  static const std::vector<std::pair<std::string, Factory>> list = {
      {"conv2d", make_conv2d},
      {"batchnorm2d", make_batchnorm2d},
      {"relu", make_relu},
      {"leaky_relu", make_leaky_relu},
      {"gelu", make_gelu},
      {"maxpool2d", make_maxpool2d},
      {"avgpool2d", make_avgpool2d},
      {"global_avg_pool", make_global_avg_pool},
      {"global_max_pool", make_global_max_pool},
      {"linear", make_linear},
      {"flatten", make_flatten},
      {"dropout", make_dropout},
      {"add", make_add},
      {"concat", make_concat},
  };
  return list;
}

}  // namespace

std::unique_ptr<Layer> make_layer(const std::string& type, const std::string& name, const YamlMap& attrs) {
  for (const auto& [known, factory] : registry())
    if (known == type) return factory(name, attrs);
  std::string list;
  for (const auto& [known, factory] : registry()) list += (list.empty() ? "" : ", ") + known;
  attrs.fail("type", "unknown layer type '" + type + "' (known: " + list + ")");
}

std::vector<std::string> layer_types() {
  std::vector<std::string> out;
  for (const auto& entry : registry()) out.push_back(entry.first);
  return out;
}

void layer_error(const Layer& layer, const std::string& message) {
  throw InputError("layer '" + layer.name() + "' (" + std::string(layer.type()) + "): " + message);
}

void expect_inputs(const Layer& layer, std::span<const Shape> inputs, size_t count, size_t rank) {
  if (count && inputs.size() != count)
    layer_error(layer, "takes " + std::to_string(count) + " input(s), got " + std::to_string(inputs.size()));
  for (const Shape& s : inputs)
    if (rank && s.size() != rank)
      layer_error(layer, "expects a " + std::to_string(rank) + "-D input per sample (" +
                             (rank == 3 ? "C, H, W" : "features") + "), got " + shape_str(s) +
                             (rank == 1 ? "; add a flatten or global pooling layer before it" : ""));
}

Tensor uniform_init(Shape shape, int64_t fan_in, std::mt19937_64& rng) {
  Tensor t = Tensor::empty(std::move(shape), DType::f32);
  const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
  std::uniform_real_distribution<float> dist(-bound, bound);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

Shape batched(int64_t n, const Shape& sample) {
  Shape s{n};
  s.insert(s.end(), sample.begin(), sample.end());
  return s;
}

}  // namespace convoy
