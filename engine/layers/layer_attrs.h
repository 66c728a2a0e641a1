#pragma once
// LayerAttrs: a layer's attributes as its factory reads them, whatever they come from (the
// model YAML through engine/graph today; an ONNX node or a torchvision mapping tomorrow).
// Errors name the attribute: the source says where (file, line, node).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace convoy {

class LayerAttrs {
 public:
  virtual ~LayerAttrs() = default;
  // A required integer.
  virtual int64_t get_int(std::string_view key) const = 0;
  virtual int64_t get_int(std::string_view key, int64_t fallback) const = 0;
  virtual double get_double(std::string_view key, double fallback) const = 0;
  virtual bool get_bool(std::string_view key, bool fallback) const = 0;
  // A scalar or a list of n numbers: `kernel: 3` -> {3, 3} when n == 2; `kernel: [3, 5]`.
  virtual std::vector<int64_t> get_ints(std::string_view key, size_t n, std::vector<int64_t> fallback) const = 0;
  // Throws InputError naming the source, the attribute and the problem.
  [[noreturn]] virtual void fail(std::string_view key, const std::string& message) const = 0;
};

}  // namespace convoy
