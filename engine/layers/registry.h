#pragma once
// The layer types a model YAML can name, and the factory that builds one.
#include <memory>
#include <string>
#include <vector>

#include "engine/config/yaml_map.h"
#include "engine/layers/layer.h"

namespace convoy {

// Builds a layer of `type` from its YAML attributes (reads them all; unknown keys are
// left for the caller's finish()). Throws InputError for an unknown type.
std::unique_ptr<Layer> make_layer(const std::string& type, const std::string& name, const YamlMap& attrs);
std::vector<std::string> layer_types();

// One factory per layer type, defined beside each layer.
std::unique_ptr<Layer> make_conv2d(const std::string& name, const YamlMap& attrs);
std::unique_ptr<Layer> make_batchnorm2d(const std::string& name, const YamlMap& attrs);
std::unique_ptr<Layer> make_relu(const std::string& name, const YamlMap& attrs);
std::unique_ptr<Layer> make_leaky_relu(const std::string& name, const YamlMap& attrs);
std::unique_ptr<Layer> make_gelu(const std::string& name, const YamlMap& attrs);
std::unique_ptr<Layer> make_maxpool2d(const std::string& name, const YamlMap& attrs);
std::unique_ptr<Layer> make_avgpool2d(const std::string& name, const YamlMap& attrs);
std::unique_ptr<Layer> make_global_avg_pool(const std::string& name, const YamlMap& attrs);
std::unique_ptr<Layer> make_global_max_pool(const std::string& name, const YamlMap& attrs);
std::unique_ptr<Layer> make_linear(const std::string& name, const YamlMap& attrs);
std::unique_ptr<Layer> make_flatten(const std::string& name, const YamlMap& attrs);
std::unique_ptr<Layer> make_dropout(const std::string& name, const YamlMap& attrs);
std::unique_ptr<Layer> make_add(const std::string& name, const YamlMap& attrs);
std::unique_ptr<Layer> make_concat(const std::string& name, const YamlMap& attrs);

// Shared by layers: throws InputError "layer '<name>' (<type>): message".
[[noreturn]] void layer_error(const Layer& layer, const std::string& message);
void expect_inputs(const Layer& layer, std::span<const Shape> inputs, size_t count, size_t rank);
// PyTorch's default init for conv and linear: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
Tensor uniform_init(Shape shape, int64_t fan_in, std::mt19937_64& rng);
// A (N, ...) batched shape from a per-sample shape.
Shape batched(int64_t n, const Shape& sample);

}  // namespace convoy
