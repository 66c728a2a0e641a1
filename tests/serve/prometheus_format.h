#pragma once
// A strict reader of Prometheus's text exposition format (0.0.4) for the metrics tests: what
// convoy serve's /metrics writes must parse line by line, each series under one declared family,
// histograms cumulative with +Inf equal to _count; and the Grafana dashboard's checks
// (deploy/monitoring/grafana/convoy-serve.json): a valid dashboard, and the metrics it queries.
#include <cmath>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace convoy::testing {

struct PrometheusSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct PrometheusText {
  std::map<std::string, std::string> types;  // family -> counter, gauge, histogram, ...
  std::vector<PrometheusSample> samples;
  std::vector<std::string> errors;  // "line 12: ..."; empty when the text is well formed

  std::set<std::string> sample_names() const {
    std::set<std::string> out;
    for (const PrometheusSample& s : samples) out.insert(s.name);
    return out;
  }
  // The value of the one sample of `name` with `labels` (a subset of its labels); NaN if none.
  double value(const std::string& name, const std::map<std::string, std::string>& labels = {}) const {
    for (const PrometheusSample& s : samples) {
      if (s.name != name) continue;
      bool all = true;
      for (const auto& [k, v] : labels) all = all && s.labels.count(k) && s.labels.at(k) == v;
      if (all) return s.value;
    }
    return std::nan("");
  }
};

inline PrometheusText parse_prometheus(const std::string& text) {
  PrometheusText out;
  static const std::regex comment(R"(# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*))");
  static const std::regex sample(R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+))");
  static const std::regex label(R"(([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)\"(,|$))");
  static const std::set<std::string> kinds = {"counter", "gauge", "histogram", "summary", "untyped"};
  std::set<std::string> series, sampled_families;
  std::istringstream lines(text);
  std::string line;
  auto family_of = [&](const std::string& name) {
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
        const std::string base = name.substr(0, name.size() - s.size());
        if (out.types.count(base) && (out.types[base] == "histogram" || out.types[base] == "summary")) return base;
      }
    }
    return name;
  };
  for (int n = 1; std::getline(lines, line); ++n) {
    const std::string at = "line " + std::to_string(n) + ": ";
    std::smatch m;
    if (line.empty()) continue;
    if (line[0] == '#') {
      if (!std::regex_match(line, m, comment)) {
        out.errors.push_back(at + "a comment that is neither # HELP nor # TYPE: " + line);
      } else if (m[1] == "TYPE") {
        if (!kinds.count(m[3].str())) out.errors.push_back(at + "unknown type " + m[3].str());
        if (out.types.count(m[2].str())) out.errors.push_back(at + "family " + m[2].str() + " declared twice");
        if (sampled_families.count(m[2].str())) out.errors.push_back(at + "TYPE of " + m[2].str() + " after its samples");
        out.types[m[2].str()] = m[3].str();
      }
      continue;
    }
    if (!std::regex_match(line, m, sample)) {
      out.errors.push_back(at + "not a sample: " + line);
      continue;
    }
    PrometheusSample s;
    s.name = m[1].str();
    std::string rest = m[3].str();
    while (!rest.empty()) {
      std::smatch l;
      if (!std::regex_search(rest, l, label) || l.position(0) != 0) {
        out.errors.push_back(at + "bad labels: " + line);
        break;
      }
      if (!s.labels.emplace(l[1].str(), l[2].str()).second) out.errors.push_back(at + "label " + l[1].str() + " twice");
      rest = l.suffix().str();
    }
    const std::string v = m[4].str();
    char* end = nullptr;
    s.value = v == "+Inf" ? HUGE_VAL : v == "-Inf" ? -HUGE_VAL : std::strtod(v.c_str(), &end);
    if (v != "+Inf" && v != "-Inf" && v != "NaN" && (end == nullptr || *end != '\0'))
      out.errors.push_back(at + "value is not a number: " + v);
    const std::string family = family_of(s.name);
    if (!out.types.count(family)) out.errors.push_back(at + s.name + " of no declared family");
    sampled_families.insert(family);
    if (!series.insert(m[1].str() + "{" + m[3].str() + "}").second) out.errors.push_back(at + "series twice: " + line);
    out.samples.push_back(std::move(s));
  }
  // Histograms: by series (labels but le), buckets never decrease and +Inf is _count.
  std::map<std::string, std::vector<double>> buckets;
  std::map<std::string, double> counts;
  for (const PrometheusSample& s : out.samples) {
    const std::string family = family_of(s.name);
    if (!out.types.count(family) || out.types[family] != "histogram") continue;
    std::string key = family;
    for (const auto& [k, v] : s.labels)
      if (k != "le") key += "," + k + "=" + v;
    if (s.name == family + "_bucket") {
      if (!s.labels.count("le")) out.errors.push_back(s.name + " without le");
      buckets[key].push_back(s.value);
      if (s.labels.count("le") && s.labels.at("le") == "+Inf") counts[key + " +Inf"] = s.value;
    } else if (s.name == family + "_count") {
      counts[key] = s.value;
    }
  }
  for (const auto& [key, b] : buckets) {
    for (size_t i = 1; i < b.size(); ++i)
      if (b[i] < b[i - 1]) out.errors.push_back(key + ": buckets not cumulative");
    if (!counts.count(key + " +Inf") || !counts.count(key) || counts[key + " +Inf"] != counts[key])
      out.errors.push_back(key + ": no +Inf bucket equal to _count");
  }
  return out;
}

// The metric names (nv_* and convoy_*) a dashboard's panels and variables query.
inline std::set<std::string> dashboard_metrics(const nlohmann::json& dashboard) {
  std::set<std::string> out;
  static const std::regex name(R"(\b((nv|convoy)_[a-zA-Z0-9_:]*))");
  auto scan = [&](const std::string& expr) {
    for (std::sregex_iterator it(expr.begin(), expr.end(), name), end; it != end; ++it) out.insert((*it)[1].str());
  };
  for (const auto& panel : dashboard.value("panels", nlohmann::json::array()))
    for (const auto& target : panel.value("targets", nlohmann::json::array()))
      if (target.contains("expr")) scan(target["expr"].get<std::string>());
  for (const auto& v : dashboard.at("templating").value("list", nlohmann::json::array()))
    if (v.value("type", "") == "query")
      scan(v.at("query").is_string() ? v.at("query").get<std::string>() : v.at("query").value("query", ""));
  return out;
}

}  // namespace convoy::testing
