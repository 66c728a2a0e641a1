#pragma once
// The layer registry: the types a model can name, and the factory that builds each.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/layers/layer.h"
#include "engine/layers/layer_attrs.h"

namespace convoy {

// Builds a layer of `type` from its attributes (reads them all; the caller rejects any
// left unread). Throws InputError for an unknown type, listing the known ones.
std::unique_ptr<Layer> make_layer(const std::string& type, const std::string& name, const LayerAttrs& attrs);
// The registered layer types, sorted.
std::vector<std::string> layer_types();

// A registered type's spec with every attribute at its default (the required ones 0), or
// nullptr for an unknown type: what a type name means, for code that reads model YAML as text.
const LayerSpec* default_spec(std::string_view type);

using LayerFactory = std::unique_ptr<Layer> (*)(const std::string& name, const LayerAttrs& attrs);
// Adds a layer type to the registry when the program starts: the type named by `defaults`'s
// type() (the spec's default, which default_spec returns). Each layer's file registers its types
// with one line, CONVOY_REGISTER_LAYER(make_conv2d, Conv2dSpec{}); nothing else lists them.
// (The build links engine/layers whole, so the linker keeps every registration.)
struct LayerRegistration {
  LayerRegistration(const LayerSpec& defaults, LayerFactory factory);
};
#define CONVOY_REGISTER_LAYER(factory, ...) \
  static const ::convoy::LayerRegistration convoy_layer_registration_##factory { __VA_ARGS__, factory }

// Shared by layers: throws InputError "layer '<name>' (<type>): message".
[[noreturn]] void layer_error(const Layer& layer, const std::string& message);
void expect_inputs(const Layer& layer, std::span<const Shape> inputs, size_t count, size_t rank);
// PyTorch's default init for conv and linear: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
Tensor uniform_init(Shape shape, int64_t fan_in, std::mt19937_64& rng);
// A (N, ...) batched shape from a per-sample shape.
Shape batched(int64_t n, const Shape& sample);

}  // namespace convoy
