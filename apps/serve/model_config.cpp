#include "apps/serve/model_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <span>

#include "engine/config/yaml_map.h"
#include "engine/core/error.h"

namespace convoy::serve {

int64_t parse_memory_size(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return -1;
  }
  std::string unit = text.substr(used);
  unit.erase(0, unit.find_first_not_of(' '));
  static const std::vector<std::pair<std::string, double>> units = {
      {"", 1.0},           {"B", 1.0},           {"KiB", 1024.0},   {"MiB", 1048576.0}, {"GiB", 1073741824.0},
      {"TiB", 1099511627776.0}, {"KB", 1e3},     {"MB", 1e6},       {"GB", 1e9},        {"TB", 1e12}};
  for (const auto& [name, scale] : units)
    if (unit == name) {
      const double bytes = value * scale;
      if (!std::isfinite(bytes) || bytes < 0 || bytes > 9e18) return -1;
      return static_cast<int64_t>(bytes);
    }
  return -1;
}

namespace {

VersionPolicy read_version_policy(const YamlMap& root) {
  VersionPolicy p;
  if (!root.has("version_policy")) return p;
  const YamlMap m = root.get_map("version_policy");
  const int given = int(m.has("latest")) + int(m.has("all")) + int(m.has("specific"));
  if (given != 1) m.fail("give exactly one of latest: N, all: true, specific: [versions]");
  if (m.has("latest")) {
    p.kind = VersionPolicy::Kind::latest;
    p.latest = m.get_int("latest");
    if (p.latest < 1) m.fail("latest", "expected at least 1");
  } else if (m.has("all")) {
    p.kind = VersionPolicy::Kind::all;
    if (!m.get_bool("all", true)) m.fail("all", "expected true (leave the policy out for the latest version)");
  } else {
    p.kind = VersionPolicy::Kind::specific;
    const YAML::Node list = m.raw("specific");
    if (!list.IsSequence() || list.size() == 0) m.fail("specific", "expected a non-empty list of version numbers");
    for (const YAML::Node& v : list) {
      int64_t n = 0;
      try {
        n = v.as<int64_t>();
      } catch (const YAML::Exception&) {
        m.fail("specific", "expected version numbers, got '" + v.as<std::string>("?") + "'");
      }
      if (n < 1) m.fail("specific", "versions are positive integers");
      p.specific.push_back(n);
    }
    std::sort(p.specific.begin(), p.specific.end());
    p.specific.erase(std::unique(p.specific.begin(), p.specific.end()), p.specific.end());
  }
  m.finish();
  return p;
}

}  // namespace

ModelConfig read_model_config(const std::string& path, const std::string& name) {
  ModelConfig c;
  c.name = name;
  if (!std::filesystem::exists(path)) return c;
  const YamlMap root(yaml_load_file(path), path, "");
  c.max_batch_size = root.get_int("max_batch_size", c.max_batch_size);
  if (c.max_batch_size < 1 || c.max_batch_size > 65536) root.fail("max_batch_size", "expected 1 to 65536");
  if (root.has("dynamic_batching")) {
    c.dynamic_batching = true;
    const YamlMap d = root.get_map("dynamic_batching");
    c.max_queue_delay_us = d.get_int("max_queue_delay_microseconds", 0);
    if (c.max_queue_delay_us < 0 || c.max_queue_delay_us > 10'000'000)
      d.fail("max_queue_delay_microseconds", "expected 0 to 10000000");
    const std::vector<double> preferred = d.get_doubles("preferred_batch_size", {});
    for (double p : preferred) {
      if (p != std::floor(p) || p < 1 || p > static_cast<double>(c.max_batch_size))
        d.fail("preferred_batch_size", "expected whole numbers from 1 to max_batch_size (" +
                                           std::to_string(c.max_batch_size) + ")");
      c.preferred_batch_size.push_back(static_cast<int64_t>(p));
    }
    std::sort(c.preferred_batch_size.begin(), c.preferred_batch_size.end());
    c.max_queue_size = d.get_int("max_queue_size", c.max_queue_size);
    if (c.max_queue_size < 1 || c.max_queue_size > 1'000'000) d.fail("max_queue_size", "expected 1 to 1000000");
    c.default_timeout_us = d.get_int("default_timeout_microseconds", 0);
    if (c.default_timeout_us < 0) d.fail("default_timeout_microseconds", "expected 0 (none) or more");
    d.finish();
  }
  c.instance_count = root.get_int("instance_count", c.instance_count);
  if (c.instance_count < 1 || c.instance_count > 64) root.fail("instance_count", "expected 1 to 64");
  c.device = root.get_string("device", c.device);
  if (c.device != "auto" && c.device != "cpu" && c.device != "cuda" && c.device.rfind("cuda:", 0) != 0)
    root.fail("device", "expected auto, cpu, cuda or cuda:N");
  c.threads = root.get_int("threads", 0);
  if (c.threads < 0 || c.threads > 1024) root.fail("threads", "expected 0 (all cores) to 1024");
  if (const std::string text = root.get_string("precision", "auto"); text != "auto") {
    c.precision = precision_from_string(text);
    const auto plan = std::span(kInferencePrecisions);
    if (!c.precision || std::find(plan.begin(), plan.end(), *c.precision) == plan.end())
      root.fail("precision", "expected auto, " + precision_list(plan.first(plan.size() - 1)) + " or " +
                                 to_string(plan.back()));
  }
  if (root.has("max_memory")) {
    const std::string text = root.get_string("max_memory");
    const int64_t bytes = parse_memory_size(text);
    if (bytes <= 0) root.fail("max_memory", "expected a size such as 2GiB, 512MiB or 1000000 (bytes), got '" + text + "'");
    c.max_memory = static_cast<uint64_t>(bytes);
  }
  c.version_policy = read_version_policy(root);
  root.finish();
  return c;
}

std::vector<int64_t> select_versions(const VersionPolicy& policy, const std::vector<int64_t>& available) {
  switch (policy.kind) {
    case VersionPolicy::Kind::all:
      return available;
    case VersionPolicy::Kind::latest: {
      const size_t n = std::min(available.size(), static_cast<size_t>(policy.latest));
      return {available.end() - static_cast<long>(n), available.end()};
    }
    case VersionPolicy::Kind::specific: {
      std::vector<int64_t> out;
      for (int64_t v : policy.specific)
        if (std::binary_search(available.begin(), available.end(), v)) out.push_back(v);
      return out;
    }
  }
  return {};
}

}  // namespace convoy::serve
