#include "engine/layers/registry.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <utility>

#include "engine/core/error.h"

namespace convoy {

namespace {

struct Registered {
  LayerFactory factory;
  LayerSpec defaults;
};

// Filled before main by the registrations in each layer's file. A function-local static, so
// it exists before the first registration whatever the order of static initialization.
std::map<std::string, Registered, std::less<>>& registry() {
  static std::map<std::string, Registered, std::less<>> types;
  return types;
}

}  // namespace

LayerRegistration::LayerRegistration(const LayerSpec& defaults, LayerFactory factory) {
  const std::string type(layer_type(defaults));
  if (!registry().emplace(type, Registered{factory, defaults}).second) {
    // Two files claim one type: a bug that must not pass silently, found before main runs.
    std::fprintf(stderr, "convoy: internal error: layer type '%s' registered twice\n", type.c_str());
    std::abort();
  }
}

std::unique_ptr<Layer> make_layer(const std::string& type, const std::string& name, const LayerAttrs& attrs) {
  const auto found = registry().find(type);
  if (found != registry().end()) return found->second.factory(name, attrs);
  std::string list;
  for (const auto& [known, registered] : registry()) list += (list.empty() ? "" : ", ") + known;
  attrs.fail("type", "unknown layer type '" + type + "' (known: " + list + ")");
  std::abort();  // not reached: fail() throws (GCC does not trust [[noreturn]] on a virtual call)
}

std::vector<std::string> layer_types() {
  std::vector<std::string> out;
  for (const auto& [type, registered] : registry()) out.push_back(type);
  return out;
}

const LayerSpec* default_spec(std::string_view type) {
  const auto found = registry().find(type);
  return found == registry().end() ? nullptr : &found->second.defaults;
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
