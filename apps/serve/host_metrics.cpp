#include "apps/serve/host_metrics.h"

#include <charconv>
#include <cstdio>
#include <vector>

namespace convoy::serve {

namespace {

// The unsigned integers of `line` separated by spaces, from its start; stops at the first word
// that is not one.
std::vector<uint64_t> numbers(std::string_view line) {
  std::vector<uint64_t> out;
  size_t at = 0;
  while (at < line.size()) {
    while (at < line.size() && line[at] == ' ') ++at;
    if (at == line.size()) break;
    uint64_t value = 0;
    const auto [end, error] = std::from_chars(line.data() + at, line.data() + line.size(), value);
    if (error != std::errc() || (end != line.data() + line.size() && *end != ' ')) break;
    out.push_back(value);
    at = static_cast<size_t>(end - line.data());
  }
  return out;
}

// The line of `text` that starts with `prefix`, without the prefix; nullopt where none does.
std::optional<std::string_view> line_after(std::string_view text, std::string_view prefix) {
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    if (line.substr(0, prefix.size()) == prefix) return line.substr(prefix.size());
    at = end + 1;
  }
  return std::nullopt;
}

uint64_t ticks_since(uint64_t before, uint64_t after) { return after > before ? after - before : 0; }

}  // namespace

std::optional<CpuTimes> parse_proc_stat(std::string_view text) {
  const std::optional<std::string_view> line = line_after(text, "cpu ");
  if (!line) return std::nullopt;
  const std::vector<uint64_t> v = numbers(*line);
  if (v.size() < 4) return std::nullopt;
  auto field = [&](size_t i) { return i < v.size() ? v[i] : 0; };
  return CpuTimes{field(0), field(1), field(2), field(3), field(4), field(5), field(6), field(7)};
}

double cpu_utilization(const CpuTimes& before, const CpuTimes& after) {
  const uint64_t busy = ticks_since(before.user, after.user) + ticks_since(before.nice, after.nice) +
                        ticks_since(before.system, after.system) + ticks_since(before.irq, after.irq) +
                        ticks_since(before.softirq, after.softirq) + ticks_since(before.steal, after.steal);
  const uint64_t idle = ticks_since(before.idle, after.idle) + ticks_since(before.iowait, after.iowait);
  if (busy + idle == 0) return 0.0;
  return static_cast<double>(busy) / static_cast<double>(busy + idle);
}

std::optional<HostMemory> parse_meminfo(std::string_view text) {
  // "MemTotal:       16314104 kB": kibibytes, whatever the unit's spelling says.
  auto kib = [&](std::string_view key) -> std::optional<uint64_t> {
    const std::optional<std::string_view> line = line_after(text, key);
    if (!line) return std::nullopt;
    const std::vector<uint64_t> v = numbers(line->substr(0, line->find(" kB")));
    if (v.size() != 1 || v[0] > UINT64_MAX / 1024) return std::nullopt;
    return v[0] * 1024;
  };
  const std::optional<uint64_t> total = kib("MemTotal:"), available = kib("MemAvailable:");
  if (!total || !available || *available > *total) return std::nullopt;
  return HostMemory{*total, *total - *available};
}

std::string read_proc_file(const char* path) {
  std::FILE* f = std::fopen(path, "re");
  if (f == nullptr) return "";
  std::string text;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) text.append(buffer, n);
  std::fclose(f);
  return text;
}

}  // namespace convoy::serve
