#pragma once
// Reading validated YAML: every value is looked up by key with its expected type, and
// every error names the file, line and key and says what was expected.
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace convoy {

// Parses a YAML file or string; syntax errors become InputError "file:line:col: ...".
// Files are read through InputFile (no devices or FIFOs), at most kMaxYamlBytes.
YAML::Node yaml_load_file(const std::string& path);
// The text of a YAML file (a config, a model), with the same checks; `what` names it in messages.
std::string read_yaml_text(const std::string& path, std::string_view what);
inline constexpr uint64_t kMaxYamlBytes = uint64_t{16} << 20;
YAML::Node yaml_load_string(const std::string& text, const std::string& source);

// The offset of the first byte that is not valid UTF-8, or std::string::npos. Checkpoint
// metadata is JSON, which holds UTF-8 only: text bound for it is checked on the way in.
size_t invalid_utf8_at(std::string_view text);

// "file:line" of a node (1-based), or just "file" when the node has no mark.
std::string yaml_where(const std::string& file, const YAML::Node& node);

// One YAML mapping, read key by key. `finish()` rejects keys nobody asked for.
class YamlMap {
 public:
  // `path` names the map for messages, e.g. "optimizer" or "layers[3] (conv1)".
  YamlMap(YAML::Node node, std::string file, std::string path);

  bool has(std::string_view key) const;
  std::string get_string(std::string_view key) const;
  std::string get_string(std::string_view key, const std::string& fallback) const;
  int64_t get_int(std::string_view key) const;
  int64_t get_int(std::string_view key, int64_t fallback) const;
  // Numbers must be finite: .nan and .inf are refused, naming the key.
  double get_double(std::string_view key) const;
  double get_double(std::string_view key, double fallback) const;
  bool get_bool(std::string_view key, bool fallback) const;
  // A scalar or a list of numbers: `kernel: 3` -> {3, 3} when n == 2; `kernel: [3, 5]`.
  std::vector<int64_t> get_ints(std::string_view key, size_t n, std::vector<int64_t> fallback) const;
  std::vector<double> get_doubles(std::string_view key, std::vector<double> fallback) const;
  std::vector<std::string> get_strings(std::string_view key, std::vector<std::string> fallback) const;
  // A nested mapping (an empty one when the key is absent).
  YamlMap get_map(std::string_view key) const;
  // Only these values are accepted for the key.
  std::string get_choice(std::string_view key, const std::string& fallback,
                         const std::vector<std::string>& choices) const;

  // Throws for the first key that was never read, listing the known keys.
  void finish() const;
  // Throws InputError "file:line: <path>.<key>: message".
  [[noreturn]] void fail(std::string_view key, const std::string& message) const;
  [[noreturn]] void fail(const std::string& message) const;

  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  const YAML::Node& node() const { return node_; }
  YAML::Node raw(std::string_view key) const;  // marks the key as read

 private:
  YAML::Node lookup(std::string_view key) const;
  // Marks the key as read; true when it has a (non-null) value.
  bool present(std::string_view key) const;
  std::string key_path(std::string_view key) const;
  YAML::Node node_;
  std::string file_;
  std::string path_;
  mutable std::set<std::string, std::less<>> read_;
};

}  // namespace convoy
