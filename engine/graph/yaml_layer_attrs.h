#pragma once
// A layer's attributes read from its mapping in a model YAML: errors name the file, line and key.
#include "engine/config/yaml_map.h"
#include "engine/layers/layer_attrs.h"

namespace convoy {

class YamlLayerAttrs final : public LayerAttrs {
 public:
  explicit YamlLayerAttrs(const YamlMap& map) : map_(map) {}
  int64_t get_int(std::string_view key) const override { return map_.get_int(key); }
  int64_t get_int(std::string_view key, int64_t fallback) const override { return map_.get_int(key, fallback); }
  double get_double(std::string_view key, double fallback) const override { return map_.get_double(key, fallback); }
  bool get_bool(std::string_view key, bool fallback) const override { return map_.get_bool(key, fallback); }
  std::string get_string(std::string_view key, const std::string& fallback) const override {
    return map_.get_string(key, fallback);
  }
  bool has(std::string_view key) const override { return map_.has(key); }
  std::vector<int64_t> get_ints(std::string_view key, size_t n, std::vector<int64_t> fallback) const override {
    return map_.get_ints(key, n, std::move(fallback));
  }
  [[noreturn]] void fail(std::string_view key, const std::string& message) const override { map_.fail(key, message); }

 private:
  const YamlMap& map_;  // outlives this adapter; it records which keys were read
};

}  // namespace convoy
