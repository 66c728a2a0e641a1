#pragma once
// Per model and version counters, kept once for two readers: Prometheus's text format in Triton's
// metric names (GET /metrics) and Triton's statistics extension (triton_stats.h). The registry also
// holds the rest of what the server records: request traces (trace.h) and its log (log_settings.h).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <utility>

#include "apps/serve/log_settings.h"
#include "apps/serve/trace.h"

namespace convoy::serve {

// Nanoseconds of a steady_clock interval; 0 for a negative one.
inline uint64_t ns_of(std::chrono::steady_clock::duration d) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  return ns > 0 ? static_cast<uint64_t>(ns) : 0;
}

// A count and its total time: Triton's StatisticDuration.
struct DurationStat {
  std::atomic<uint64_t> count{0};
  std::atomic<uint64_t> ns{0};
  void add(uint64_t duration_ns) {
    count++;
    ns += duration_ns;
  }
};

// The model executions of one batch size (Triton's InferBatchStatistics); one count each, kept
// apart so that a reader never sees a batch half counted.
struct BatchStat {
  uint64_t count = 0;
  uint64_t compute_input_ns = 0, compute_infer_ns = 0, compute_output_ns = 0;
};

// The phases of a batch: compute_input assembles (or decodes) the batch on the host, compute_infer
// runs the model and brings its outputs to the host (on a GPU the upload is part of the recorded
// forward), compute_output copies each request's rows out of the batch's outputs.
struct ModelMetrics {
  std::atomic<uint64_t> request_success{0};  // nv_inference_request_success
  std::atomic<uint64_t> request_failure{0};  // nv_inference_request_failure
  std::atomic<uint64_t> inference_count{0};  // nv_inference_count: samples inferred
  std::atomic<uint64_t> exec_count{0};       // nv_inference_exec_count: batches run
  std::atomic<uint64_t> request_duration_ns{0};  // receipt to response, successful requests
  std::atomic<uint64_t> failure_duration_ns{0};  // receipt to response, failed requests
  // Per request that reached a batch: its time queued, and its batch's phases.
  DurationStat queue, compute_input, compute_infer, compute_output;
  std::atomic<uint64_t> last_inference_ms{0};  // when a request last completed, ms since the epoch
  std::atomic<int64_t> queue_size{0};            // gauge
  std::atomic<uint64_t> memory_bytes{0};         // gauge: the load's memory estimate

  // A request taken into a batch: its queueing and its batch's phases.
  void record_request(uint64_t queue_ns, uint64_t input_ns, uint64_t infer_ns, uint64_t output_ns);
  // A model execution of `batch_size` samples that succeeded.
  void record_batch(int64_t batch_size, uint64_t input_ns, uint64_t infer_ns, uint64_t output_ns);
  // A request answered (successfully or not) `duration_ns` after its receipt, now.
  void record_completion(bool success, uint64_t duration_ns);
  // The batch sizes run, ascending.
  std::map<int64_t, BatchStat> batches() const;

 private:
  mutable std::mutex batches_mutex_;
  std::map<int64_t, BatchStat> batches_;
};

// The server's own resources, which hostile clients go after first: connections (capped, the
// idle and slow shed to make room), the worker pool that does requests' heavy work, the image budget.
struct ServerMetrics {
  std::atomic<int64_t> connections{0};           // gauge: HTTP connections open (both ports)
  std::atomic<int64_t> max_connections{0};       // gauge: the cap
  std::atomic<int64_t> shed_idle{0};             // closed to make room: waiting for a request
  std::atomic<int64_t> shed_slow{0};             // closed to make room: a request or reply half sent
  std::atomic<int64_t> refused{0};               // new connections closed: every open one busy
  std::atomic<int64_t> header_timeouts{0};       // request headers not complete in time
  std::atomic<int64_t> accept_errors{0};         // accept() failures (EMFILE, ...), each backed off
  std::atomic<int64_t> worker_threads{0};        // gauge
  std::atomic<int64_t> worker_queue{0};          // gauge: requests waiting for a worker
  std::atomic<int64_t> worker_rejected{0};       // answered 503: the worker queue was full
  std::atomic<int64_t> image_budget_refused{0};  // answered 413: images over the pixel or byte budget
};

// The metrics of every (model, version) ever served; entries live as long as the registry, so
// counters keep counting across an unload and a reload, as Prometheus expects.
class MetricsRegistry {
 public:
  ModelMetrics& get(const std::string& model, int64_t version);
  ServerMetrics& server() { return server_; }
  std::string prometheus_text() const;
  // Beside the counters, so that both protocols and the batcher's callers reach them as they do
  // the counters: the sampled requests' traces, and the log.
  RequestTracer& tracer() { return tracer_; }
  ServeLog& log() { return log_; }

 private:
  void server_text(std::ostream& out) const;

  ServerMetrics server_;
  RequestTracer tracer_;
  ServeLog log_;
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int64_t>, std::unique_ptr<ModelMetrics>> models_;
};

}  // namespace convoy::serve
