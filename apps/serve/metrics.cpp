#include "apps/serve/metrics.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "apps/serve/device_metrics.h"
#include "apps/serve/prometheus_text.h"

namespace convoy::serve {

void AtomicHistogram::observe(uint64_t value) {
  const auto bucket = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

void AtomicHistogram::write(std::ostream& out, const char* name, const std::string& labels) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    cumulative += counts_[i].load(std::memory_order_relaxed);
    out << name << "_bucket{" << labels << ",le=\"";
    if (i < bounds_.size())
      out << bounds_[i];
    else
      out << "+Inf";
    out << "\"} " << cumulative << '\n';
  }
  out << name << "_sum{" << labels << "} " << sum_.load(std::memory_order_relaxed) << '\n';
  out << name << "_count{" << labels << "} " << cumulative << '\n';
}

void ModelMetrics::record_request(uint64_t queue_ns, uint64_t input_ns, uint64_t infer_ns, uint64_t output_ns) {
  queue.add(queue_ns);
  compute_input.add(input_ns);
  compute_infer.add(infer_ns);
  compute_output.add(output_ns);
}

void ModelMetrics::record_batch(int64_t batch_size, uint64_t input_ns, uint64_t infer_ns, uint64_t output_ns) {
  batch_size_histogram.observe(static_cast<uint64_t>(batch_size));
  exec_infer_ns.fetch_add(infer_ns, std::memory_order_relaxed);
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
    request_duration_us.observe(duration_ns / 1000);
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
  std::ostringstream out;
  {
    std::lock_guard lock(mutex_);
    model_text(out);
  }
  server_text(out);
  if (const DeviceMetrics* devices = devices_.load()) devices->write_prometheus(out);
  return out.str();
}

void MetricsRegistry::model_text(std::ostream& out) const {
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
      {"convoy_inference_execution_duration_us", "counter",
       "Cumulative compute inference duration of model executions in microseconds, each batch once "
       "(nv_inference_compute_infer_duration_us counts a batch once per request in it)",
       [](const ModelMetrics& m) -> uint64_t { return m.exec_infer_ns / 1000; }},
      {"convoy_model_memory_bytes", "gauge",
       "Estimated memory of the loaded model version (weights and activations), as accounted against max_memory",
       [](const ModelMetrics& m) -> uint64_t { return m.memory_bytes; }},
      {"convoy_model_memory_budget_bytes", "gauge",
       "The model's max_memory, for all its loaded versions together (0: no budget)",
       [](const ModelMetrics& m) -> uint64_t { return m.memory_budget_bytes; }},
      {"convoy_model_instance_count", "gauge", "Execution instances of the loaded model version (0: not loaded)",
       [](const ModelMetrics& m) -> uint64_t { return static_cast<uint64_t>(std::max<int64_t>(0, m.instance_count)); }},
  };
  auto labels_of = [](const std::pair<std::string, int64_t>& key) {
    return "model=\"" + prometheus_label(key.first) + "\",version=\"" + std::to_string(key.second) + "\"";
  };
  for (const Family& f : families) {
    prometheus_header(out, f.name, f.type, f.help);
    for (const auto& [key, m] : models_) out << f.name << '{' << labels_of(key) << "} " << f.value(*m) << '\n';
  }
  prometheus_header(out, "convoy_inference_batch_size", "histogram",
                    "Samples per model execution: the batches the (dynamic) batcher formed and ran");
  for (const auto& [key, m] : models_) m->batch_size_histogram.write(out, "convoy_inference_batch_size", labels_of(key));
  prometheus_header(out, "convoy_inference_request_duration_us", "histogram",
                    "Inference request duration in microseconds, successful requests (nv_inference_request_duration_us "
                    "in buckets, for quantiles)");
  for (const auto& [key, m] : models_) m->request_duration_us.write(out, "convoy_inference_request_duration_us", labels_of(key));
  // Where each loaded version runs, to join its series with the nv_gpu_* ones of its GPU.
  prometheus_header(out, "convoy_model_device_info", "gauge",
                    "1 for each loaded model version, labelled with its device (cpu, cuda:N) and that GPU's gpu_uuid");
  const DeviceMetrics* devices = devices_.load();
  for (const auto& [key, m] : models_) {
    if (m->instance_count <= 0) continue;
    const int cuda = m->cuda_device;
    const std::string uuid = cuda >= 0 && devices != nullptr ? devices->gpu_uuid(cuda) : "";
    out << "convoy_model_device_info{" << labels_of(key) << ",device=\"" << (cuda >= 0 ? "cuda:" + std::to_string(cuda) : "cpu")
        << "\",gpu_uuid=\"" << prometheus_label(uuid) << "\"} 1\n";
  }
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
