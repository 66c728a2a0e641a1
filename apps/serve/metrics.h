#pragma once
// Per model and version counters in Triton's metric names, rendered in Prometheus's text format.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace convoy::serve {

struct ModelMetrics {
  std::atomic<uint64_t> request_success{0};  // nv_inference_request_success
  std::atomic<uint64_t> request_failure{0};  // nv_inference_request_failure
  std::atomic<uint64_t> inference_count{0};  // nv_inference_count: samples inferred
  std::atomic<uint64_t> exec_count{0};       // nv_inference_exec_count: batches run
  std::atomic<uint64_t> request_duration_us{0};  // receipt to response, successful requests
  std::atomic<uint64_t> queue_duration_us{0};    // queued, waiting for an instance
  std::atomic<uint64_t> compute_duration_us{0};  // in the model (per request, the batch's time)
  std::atomic<int64_t> queue_size{0};            // gauge
  std::atomic<uint64_t> memory_bytes{0};         // gauge: the load's memory estimate
};

// The metrics of every (model, version) ever served; entries live as long as the registry, so
// counters keep counting across an unload and a reload, as Prometheus expects.
class MetricsRegistry {
 public:
  ModelMetrics& get(const std::string& model, int64_t version);
  std::string prometheus_text() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int64_t>, std::unique_ptr<ModelMetrics>> models_;
};

}  // namespace convoy::serve
