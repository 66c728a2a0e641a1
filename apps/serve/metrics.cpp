#include "apps/serve/metrics.h"

#include <sstream>
#include <vector>

namespace convoy::serve {

ModelMetrics& MetricsRegistry::get(const std::string& model, int64_t version) {
  std::lock_guard lock(mutex_);
  auto& slot = models_[{model, version}];
  if (!slot) slot = std::make_unique<ModelMetrics>();
  return *slot;
}

std::string MetricsRegistry::prometheus_text() const {
  struct Family {
    const char* name;
    const char* type;
    const char* help;
    uint64_t (*value)(const ModelMetrics&);
  };
  static const std::vector<Family> families = {
      {"nv_inference_request_success", "counter", "Number of successful inference requests, all batch sizes",
       [](const ModelMetrics& m) -> uint64_t { return m.request_success; }},
      {"nv_inference_request_failure", "counter", "Number of failed inference requests, all batch sizes",
       [](const ModelMetrics& m) -> uint64_t { return m.request_failure; }},
      {"nv_inference_count", "counter", "Number of inferences performed (does not include cached requests)",
       [](const ModelMetrics& m) -> uint64_t { return m.inference_count; }},
      {"nv_inference_exec_count", "counter", "Number of model executions performed",
       [](const ModelMetrics& m) -> uint64_t { return m.exec_count; }},
      {"nv_inference_request_duration_us", "counter", "Cumulative inference request duration in microseconds",
       [](const ModelMetrics& m) -> uint64_t { return m.request_duration_us; }},
      {"nv_inference_queue_duration_us", "counter", "Cumulative inference queuing duration in microseconds",
       [](const ModelMetrics& m) -> uint64_t { return m.queue_duration_us; }},
      {"nv_inference_compute_infer_duration_us", "counter", "Cumulative compute inference duration in microseconds",
       [](const ModelMetrics& m) -> uint64_t { return m.compute_duration_us; }},
      {"nv_inference_pending_request_count", "gauge", "Instantaneous number of pending requests awaiting execution",
       [](const ModelMetrics& m) -> uint64_t { return static_cast<uint64_t>(std::max<int64_t>(0, m.queue_size)); }},
      {"convoy_model_memory_bytes", "gauge", "Estimated memory of the loaded model version (weights and activations)",
       [](const ModelMetrics& m) -> uint64_t { return m.memory_bytes; }},
  };
  std::lock_guard lock(mutex_);
  std::ostringstream out;
  for (const Family& f : families) {
    out << "# HELP " << f.name << " " << f.help << "\n# TYPE " << f.name << " " << f.type << "\n";
    for (const auto& [key, m] : models_)
      out << f.name << "{model=\"" << key.first << "\",version=\"" << key.second << "\"} " << f.value(*m) << "\n";
  }
  return out.str();
}

}  // namespace convoy::serve
