#include "apps/serve/triton_stats.h"

#include <nlohmann/json.hpp>

#include "apps/serve/kserve_json.h"

namespace convoy::serve {

using json = nlohmann::json;

namespace {

json duration(uint64_t count, uint64_t ns) { return {{"count", count}, {"ns", ns}}; }
json duration(const DurationStat& d) { return duration(d.count, d.ns); }

json model_stat(const std::string& model, int64_t version, const ModelMetrics& m) {
  json batches = json::array();
  for (const auto& [size, b] : m.batches())
    batches.push_back({{"batch_size", size},
                       {"compute_input", duration(b.count, b.compute_input_ns)},
                       {"compute_infer", duration(b.count, b.compute_infer_ns)},
                       {"compute_output", duration(b.count, b.compute_output_ns)}});
  const json inference = {{"success", duration(m.request_success, m.request_duration_ns)},
                          {"fail", duration(m.request_failure, m.failure_duration_ns)},
                          {"queue", duration(m.queue)},
                          {"compute_input", duration(m.compute_input)},
                          {"compute_infer", duration(m.compute_infer)},
                          {"compute_output", duration(m.compute_output)},
                          {"cache_hit", duration(0, 0)}};  // no response cache
  return {{"name", model},
          {"version", std::to_string(version)},
          {"last_inference", m.last_inference_ms.load()},
          {"inference_count", m.inference_count.load()},
          {"execution_count", m.exec_count.load()},
          {"inference_stats", inference},
          {"batch_stats", batches}};
}

}  // namespace

std::string model_statistics_json(const ModelRepository& repository, MetricsRegistry& metrics, const std::string& model,
                                  int64_t version) {
  json stats = json::array();
  if (model.empty()) {
    for (const IndexEntry& e : repository.index())
      if (e.state == "READY") stats.push_back(model_stat(e.name, std::stoll(e.version), metrics.get(e.name, std::stoll(e.version))));
    return json{{"model_stats", stats}}.dump();
  }
  std::string why;
  if (!repository.find(model, version, why)) throw RequestError(404, why);
  if (version != 0) {
    stats.push_back(model_stat(model, version, metrics.get(model, version)));
  } else {
    for (int64_t v : repository.ready_versions(model)) stats.push_back(model_stat(model, v, metrics.get(model, v)));
  }
  return json{{"model_stats", stats}}.dump();
}

}  // namespace convoy::serve
