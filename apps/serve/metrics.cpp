#include "apps/serve/metrics.h"

#include <algorithm>
#include <sstream>
#include <vector>

namespace convoy::serve {

void ModelMetrics::record_request(uint64_t queue_ns, uint64_t input_ns, uint64_t infer_ns, uint64_t output_ns) {
  queue.add(queue_ns);
  compute_input.add(input_ns);
  compute_infer.add(infer_ns);
  compute_output.add(output_ns);
}

void ModelMetrics::record_batch(int64_t batch_size, uint64_t input_ns, uint64_t infer_ns, uint64_t output_ns) {
  std::lock_guard lock(batches_mutex_);
  BatchStat& b = batches_[batch_size];
  b.count++;
  b.compute_input_ns += input_ns;
  b.compute_infer_ns += infer_ns;
  b.compute_output_ns += output_ns;
}

void ModelMetrics::record_completion(bool success, uint64_t duration_ns) {
  // The failure's count is taken where it fails (the queue, the batcher, the decoder, the model).
  if (success) {
    request_success++;
    request_duration_ns += duration_ns;
  } else {
    failure_duration_ns += duration_ns;
  }
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  last_inference_ms = static_cast<uint64_t>(now.count());
}

std::map<int64_t, BatchStat> ModelMetrics::batches() const {
  std::lock_guard lock(batches_mutex_);
  return batches_;
}

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
       [](const ModelMetrics& m) -> uint64_t { return m.request_duration_ns / 1000; }},
      {"nv_inference_queue_duration_us", "counter", "Cumulative inference queuing duration in microseconds",
       [](const ModelMetrics& m) -> uint64_t { return m.queue.ns / 1000; }},
      {"nv_inference_compute_input_duration_us", "counter", "Cumulative compute input duration in microseconds",
       [](const ModelMetrics& m) -> uint64_t { return m.compute_input.ns / 1000; }},
      {"nv_inference_compute_infer_duration_us", "counter", "Cumulative compute inference duration in microseconds",
       [](const ModelMetrics& m) -> uint64_t { return m.compute_infer.ns / 1000; }},
      {"nv_inference_compute_output_duration_us", "counter", "Cumulative inference compute output duration in microseconds",
       [](const ModelMetrics& m) -> uint64_t { return m.compute_output.ns / 1000; }},
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
  server_text(out);
  return out.str();
}

void MetricsRegistry::server_text(std::ostream& out) const {
  struct Series {
    const char* name;
    const char* labels;
    const char* type;
    const char* help;  // of the first series of a name
    std::atomic<int64_t> ServerMetrics::*value;
  };
  static constexpr Series kSeries[] = {
      {"convoy_http_connections", "", "gauge", "HTTP connections open", &ServerMetrics::connections},
      {"convoy_http_connections_max", "", "gauge", "The cap on open HTTP connections (--max-connections)",
       &ServerMetrics::max_connections},
      {"convoy_http_connections_shed_total", "{reason=\"idle\"}", "counter",
       "HTTP connections closed to make room for a new one: idle, or slow (a request or reply half sent)",
       &ServerMetrics::shed_idle},
      {"convoy_http_connections_shed_total", "{reason=\"slow\"}", "", "", &ServerMetrics::shed_slow},
      {"convoy_http_connections_refused_total", "", "counter", "New HTTP connections closed at the cap, every open one busy",
       &ServerMetrics::refused},
      {"convoy_http_header_timeouts_total", "", "counter", "HTTP requests whose headers were not complete in time",
       &ServerMetrics::header_timeouts},
      {"convoy_http_accept_errors_total", "", "counter", "Failed accepts (out of descriptors, ...), each backed off",
       &ServerMetrics::accept_errors},
      {"convoy_worker_threads", "", "gauge", "Threads of the pool that parses, decodes and builds replies",
       &ServerMetrics::worker_threads},
      {"convoy_worker_queue_size", "", "gauge", "Requests waiting for a worker", &ServerMetrics::worker_queue},
      {"convoy_worker_rejected_total", "", "counter", "Requests answered 503 because the worker queue was full",
       &ServerMetrics::worker_rejected},
      {"convoy_image_budget_refused_total", "", "counter",
       "Requests refused (413) for images over the pixel or byte budget", &ServerMetrics::image_budget_refused},
  };
  for (const Series& s : kSeries) {
    if (*s.type) out << "# HELP " << s.name << " " << s.help << "\n# TYPE " << s.name << " " << s.type << "\n";
    out << s.name << s.labels << " " << (server_.*s.value).load() << "\n";
  }
}

}  // namespace convoy::serve
