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
  virtual std::string get_string(std::string_view key, const std::string& fallback) const = 0;
  // Whether the attribute is given (a null value is not).
  virtual bool has(std::string_view key) const = 0;
  // A scalar or a list of n numbers: `kernel: 3` -> {3, 3} when n == 2; `kernel: [3, 5]`.
  virtual std::vector<int64_t> get_ints(std::string_view key, size_t n, std::vector<int64_t> fallback) const = 0;
  // Throws InputError naming the source, the attribute and the problem.
  [[noreturn]] virtual void fail(std::string_view key, const std::string& message) const = 0;

  // The same, bounded: a value outside lo ... hi is "<key>: N is out of range (expected lo ... hi)".
  int64_t get_int_in(std::string_view key, int64_t lo, int64_t hi) const {
    return in_range(key, get_int(key), lo, hi);
  }
  int64_t get_int_in(std::string_view key, int64_t fallback, int64_t lo, int64_t hi) const {
    return in_range(key, get_int(key, fallback), lo, hi);
  }
  std::vector<int64_t> get_ints_in(std::string_view key, size_t n, std::vector<int64_t> fallback, int64_t lo,
                                   int64_t hi) const {
    std::vector<int64_t> values = get_ints(key, n, std::move(fallback));
    for (int64_t v : values) in_range(key, v, lo, hi);
    return values;
  }

 private:
  int64_t in_range(std::string_view key, int64_t value, int64_t lo, int64_t hi) const {
    if (value < lo || value > hi)
      fail(key, std::to_string(value) + " is out of range (expected " + std::to_string(lo) + " ... " +
                    std::to_string(hi) + ")");
    return value;
  }
};

// Bounds of what a model file may ask for: sizes beyond them are typos (or hostile), and are
// refused before any arithmetic on them can overflow or any memory is allocated.
inline constexpr int64_t kMaxChannels = int64_t{1} << 24;  // features, channels, groups, classes
inline constexpr int64_t kMaxWindow = 1024;                // kernel, stride, dilation, padding
inline constexpr int64_t kMaxLayerParameters = int64_t{1} << 31;  // elements of one layer's weights
inline constexpr int64_t kMaxModelParameters = int64_t{1} << 32;  // of the whole model
inline constexpr int64_t kMaxSampleElements = int64_t{1} << 31;   // of one layer's output per sample

}  // namespace convoy
