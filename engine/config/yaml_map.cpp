#include "engine/config/yaml_map.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"
#include "engine/core/file_io.h"

namespace convoy {

namespace {

std::string scalar_kind(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null: return "nothing";
    case YAML::NodeType::Scalar: return "'" + node.Scalar() + "'";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Undefined: return "an undefined value";
  }
  return "an undefined value";
}

}  // namespace

size_t invalid_utf8_at(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
    else return i;
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
      return i;
    i += len;
  }
  return std::string::npos;
}

YAML::Node yaml_load_string(const std::string& text, const std::string& source) {
  if (const size_t bad = invalid_utf8_at(text); bad != std::string::npos) {
    const size_t line = static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<long>(bad), '\n')) + 1;
    throw InputError(source + ":" + std::to_string(line) + ": not UTF-8 text (byte " + std::to_string(bad) +
                     " is not valid UTF-8)");
  }
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(source + ":" + std::to_string(e.mark.line + 1) + ":" +
                     std::to_string(e.mark.column + 1) + ": invalid YAML: " + e.msg);
  }
}

YAML::Node yaml_load_file(const std::string& path) {
  return yaml_load_string(read_yaml_text(path, "YAML file"), path);
}

std::string read_yaml_text(const std::string& path, std::string_view what) {
  return read_text_file(path, what, kMaxYamlBytes);
}

std::string yaml_where(const std::string& file, const YAML::Node& node) {
  if (!node.IsDefined()) return file;
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return file;
  return file + ":" + std::to_string(mark.line + 1);
}

YamlMap::YamlMap(YAML::Node node, std::string file, std::string path)
    : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)) {
  if (!node_.IsDefined() || node_.IsNull()) {  // IsNull() throws on an undefined node
    node_ = YAML::Node(YAML::NodeType::Map);
  } else if (!node_.IsMap()) {
    throw InputError(yaml_where(file_, node_) + ": " + (path_.empty() ? "the file" : path_) +
                     ": expected a mapping of keys to values, found " + scalar_kind(node_));
  }
}

std::string YamlMap::key_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

void YamlMap::fail(std::string_view key, const std::string& message) const {
  const YAML::Node value = node_[std::string(key)];
  throw InputError(yaml_where(file_, value.IsDefined() ? value : node_) + ": " + key_path(key) +
                   ": " + message);
}

void YamlMap::fail(const std::string& message) const {
  throw InputError(yaml_where(file_, node_) + ": " + (path_.empty() ? "" : path_ + ": ") + message);
}

YAML::Node YamlMap::lookup(std::string_view key) const {
  read_.insert(std::string(key));
  return node_[std::string(key)];
}

YAML::Node YamlMap::raw(std::string_view key) const { return lookup(key); }

bool YamlMap::present(std::string_view key) const {
  const YAML::Node n = lookup(key);
  return n.IsDefined() && !n.IsNull();
}

bool YamlMap::has(std::string_view key) const {
  const YAML::Node n = node_[std::string(key)];
  return n.IsDefined() && !n.IsNull();
}

std::string YamlMap::get_string(std::string_view key) const {
  const YAML::Node n = lookup(key);
  if (!n.IsDefined() || n.IsNull()) fail(key, "missing (expected a string)");
  if (!n.IsScalar()) fail(key, "expected a string, found " + scalar_kind(n));
  return n.Scalar();
}

std::string YamlMap::get_string(std::string_view key, const std::string& fallback) const {
  return present(key) ? get_string(key) : fallback;
}

int64_t YamlMap::get_int(std::string_view key) const {
  const YAML::Node n = lookup(key);
  if (!n.IsDefined() || n.IsNull()) fail(key, "missing (expected an integer)");
  try {
    if (!n.IsScalar()) throw YAML::Exception(YAML::Mark::null_mark(), "");
    return n.as<int64_t>();
  } catch (const YAML::Exception&) {
    fail(key, "expected an integer, found " + scalar_kind(n));
  }
}

int64_t YamlMap::get_int(std::string_view key, int64_t fallback) const {
  return present(key) ? get_int(key) : fallback;
}

double YamlMap::get_double(std::string_view key) const {
  const YAML::Node n = lookup(key);
  if (!n.IsDefined() || n.IsNull()) fail(key, "missing (expected a number)");
  double value = 0;
  try {
    if (!n.IsScalar()) throw YAML::Exception(YAML::Mark::null_mark(), "");
    value = n.as<double>();
  } catch (const YAML::Exception&) {
    fail(key, "expected a number, found " + scalar_kind(n));
  }
  if (!std::isfinite(value)) fail(key, "expected a finite number, found " + scalar_kind(n));
  return value;
}

double YamlMap::get_double(std::string_view key, double fallback) const {
  return present(key) ? get_double(key) : fallback;
}

bool YamlMap::get_bool(std::string_view key, bool fallback) const {
  const YAML::Node n = lookup(key);
  if (!n.IsDefined() || n.IsNull()) return fallback;
  try {
    if (!n.IsScalar()) throw YAML::Exception(YAML::Mark::null_mark(), "");
    return n.as<bool>();
  } catch (const YAML::Exception&) {
    fail(key, "expected true or false, found " + scalar_kind(n));
  }
}

std::vector<int64_t> YamlMap::get_ints(std::string_view key, size_t n,
                                       std::vector<int64_t> fallback) const {
  const YAML::Node node = lookup(key);
  if (!node.IsDefined() || node.IsNull()) return fallback;
  const std::string expected =
      "expected an integer or a list of " + std::to_string(n) + " integers";
  try {
    if (node.IsScalar()) return std::vector<int64_t>(n, node.as<int64_t>());
    if (node.IsSequence() && node.size() == n) {
      std::vector<int64_t> out;
      for (const auto& item : node) out.push_back(item.as<int64_t>());
      return out;
    }
  } catch (const YAML::Exception&) {
  }
  fail(key, expected + ", found " + scalar_kind(node));
}

std::vector<double> YamlMap::get_doubles(std::string_view key, std::vector<double> fallback) const {
  const YAML::Node node = lookup(key);
  if (!node.IsDefined() || node.IsNull()) return fallback;
  std::vector<double> out;
  try {
    if (node.IsScalar()) {
      out.push_back(node.as<double>());
    } else if (node.IsSequence()) {
      for (const auto& item : node) out.push_back(item.as<double>());
    } else {
      throw YAML::Exception(YAML::Mark::null_mark(), "");
    }
  } catch (const YAML::Exception&) {
    fail(key, "expected a number or a list of numbers, found " + scalar_kind(node));
  }
  for (double v : out)
    if (!std::isfinite(v))
      fail(key, "expected finite numbers, found " + std::string(std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"));
  return out;
}

std::vector<std::string> YamlMap::get_strings(std::string_view key,
                                              std::vector<std::string> fallback) const {
  const YAML::Node node = lookup(key);
  if (!node.IsDefined() || node.IsNull()) return fallback;
  if (node.IsScalar()) return {node.Scalar()};
  if (node.IsSequence()) {
    std::vector<std::string> out;
    for (const auto& item : node) {
      if (!item.IsScalar()) fail(key, "expected a list of strings, found " + scalar_kind(item) + " in it");
      out.push_back(item.Scalar());
    }
    return out;
  }
  fail(key, "expected a string or a list of strings, found " + scalar_kind(node));
}

YamlMap YamlMap::get_map(std::string_view key) const {
  const YAML::Node n = lookup(key);
  if (n.IsDefined() && !n.IsNull() && !n.IsMap())
    fail(key, "expected a mapping of keys to values, found " + scalar_kind(n));
  return YamlMap(n.IsDefined() ? n : YAML::Node(), file_, key_path(key));
}

std::string YamlMap::get_choice(std::string_view key, const std::string& fallback,
                                const std::vector<std::string>& choices) const {
  const std::string value = get_string(key, fallback);
  if (std::find(choices.begin(), choices.end(), value) == choices.end()) {
    std::string list;
    for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
    fail(key, "'" + value + "' is not one of: " + list);
  }
  return value;
}

void YamlMap::finish() const {
  for (const auto& item : node_) {
    const std::string key = item.first.Scalar();
    if (read_.count(key)) continue;
    std::string known;
    for (const auto& k : read_) known += (known.empty() ? "" : ", ") + k;
    throw InputError(yaml_where(file_, item.first) + ": " + key_path(key) + ": unknown key" +
                     (known.empty() ? "" : " (expected one of: " + known + ")"));
  }
}

}  // namespace convoy
