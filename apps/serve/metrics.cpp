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
  const ServerMetrics& s = server_;
  auto family = [&out](const char* name, const char* type, const char* help) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  };
  family("convoy_http_connections", "gauge", "HTTP connections open");
  out << "convoy_http_connections " << s.connections << "\n";
  family("convoy_http_connections_max", "gauge", "The cap on open HTTP connections (--max-connections)");
  out << "convoy_http_connections_max " << s.max_connections << "\n";
  family("convoy_http_connections_shed_total", "counter",
         "HTTP connections closed to make room for a new one: idle, or slow (a request or reply half sent)");
  out << "convoy_http_connections_shed_total{reason=\"idle\"} " << s.shed_idle << "\n";
  out << "convoy_http_connections_shed_total{reason=\"slow\"} " << s.shed_slow << "\n";
  family("convoy_http_connections_refused_total", "counter", "New HTTP connections closed at the cap, every open one busy");
  out << "convoy_http_connections_refused_total " << s.refused << "\n";
  family("convoy_http_header_timeouts_total", "counter", "HTTP requests whose headers were not complete in time");
  out << "convoy_http_header_timeouts_total " << s.header_timeouts << "\n";
  family("convoy_http_accept_errors_total", "counter", "Failed accepts (out of descriptors, ...), each backed off");
  out << "convoy_http_accept_errors_total " << s.accept_errors << "\n";
  family("convoy_worker_threads", "gauge", "Threads of the pool that parses, decodes and builds replies");
  out << "convoy_worker_threads " << s.worker_threads << "\n";
  family("convoy_worker_queue_size", "gauge", "Requests waiting for a worker");
  out << "convoy_worker_queue_size " << s.worker_queue << "\n";
  family("convoy_worker_rejected_total", "counter", "Requests answered 503 because the worker queue was full");
  out << "convoy_worker_rejected_total " << s.worker_rejected << "\n";
  family("convoy_image_budget_refused_total", "counter", "Requests refused (413) for images over the pixel or byte budget");
  out << "convoy_image_budget_refused_total " << s.image_budget_refused << "\n";
}

}  // namespace convoy::serve
