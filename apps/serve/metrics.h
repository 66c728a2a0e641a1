#pragma once
// Per model and version counters, kept once for two readers: Prometheus's text format in Triton's
// metric names (GET /metrics) and Triton's statistics extension (triton_stats.h). The registry also
// holds the rest of what the server records: request traces (trace.h) and its log (log_settings.h);
// /metrics adds the GPUs' and the host's last sample (device_metrics.h).
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

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

// A Prometheus histogram of fixed bucket bounds (`le`, in its unit), counted with relaxed atomics
// only: observing takes no lock on the request path. A reader may see a value's bucket counted and
// its sum not yet (one scrape apart), never a bucket's count go down.
class AtomicHistogram {
 public:
  explicit AtomicHistogram(std::span<const uint64_t> bounds) : bounds_(bounds), counts_(bounds.size() + 1) {}
  void observe(uint64_t value);
  // The _bucket (cumulative, +Inf last), _sum and _count lines of one series; `labels` are the
  // series' own, without braces (model="m",version="1").
  void write(std::ostream& out, const char* name, const std::string& labels) const;

 private:
  std::span<const uint64_t> bounds_;  // ascending
  std::vector<std::atomic<uint64_t>> counts_;  // by bucket, not cumulative; the last one past every bound
  std::atomic<uint64_t> sum_{0};
};

// The batch sizes' buckets: powers of two up to max_batch_size's limit (65536). A dynamic batcher
// that forms the batches it should shows its preferred size's bucket filling.
inline constexpr std::array<uint64_t, 17> kBatchSizeBounds = {1,   2,   4,    8,    16,   32,    64,    128,  256,
                                                              512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
// Request latency's buckets in microseconds, 50 us to 10 s at about 1.5x apart, so that a p50 or
// p99 read off them by histogram_quantile is within a bucket's width of the truth.
inline constexpr std::array<uint64_t, 30> kLatencyBoundsUs = {
    50,    75,    100,   150,    200,    300,    500,    750,    1000,    1500,
    2000,  3000,  5000,  7500,   10000,  15000,  20000,  30000,  50000,   75000,
    100000, 150000, 200000, 300000, 500000, 750000, 1000000, 2000000, 5000000, 10000000};

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
  std::atomic<uint64_t> memory_bytes{0};         // gauge: the load's memory estimate, accounted against max_memory
  // Set while the version is loaded (0, 0 and -1 once unloaded): its model's max_memory (for all
  // its versions together; 0: none), its execution instances, and the GPU they run on (cuda:N; -1: the CPU).
  std::atomic<uint64_t> memory_budget_bytes{0};
  std::atomic<int64_t> instance_count{0};
  std::atomic<int> cuda_device{-1};
  std::atomic<const void*> loaded_by{nullptr};  // the ServedVersion that set them, which alone clears them
  std::atomic<uint64_t> exec_infer_ns{0};  // compute_infer counted once per execution, not per request
  AtomicHistogram batch_size_histogram{kBatchSizeBounds};  // samples per execution
  AtomicHistogram request_duration_us{kLatencyBoundsUs};    // receipt to response, successful requests

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
class DeviceMetrics;

class MetricsRegistry {
 public:
  ModelMetrics& get(const std::string& model, int64_t version);
  ServerMetrics& server() { return server_; }
  std::string prometheus_text() const;
  // The GPU and host samples /metrics adds (nullptr: none), and where a model's cuda:N finds its
  // gpu_uuid; set before serving, and outlived by `devices`.
  void set_device_metrics(const DeviceMetrics* devices) { devices_ = devices; }
  // Beside the counters, so that both protocols and the batcher's callers reach them as they do
  // the counters: the sampled requests' traces, and the log.
  RequestTracer& tracer() { return tracer_; }
  ServeLog& log() { return log_; }

 private:
  void server_text(std::ostream& out) const;
  void model_text(std::ostream& out) const;  // under mutex_

  ServerMetrics server_;
  RequestTracer tracer_;
  ServeLog log_;
  std::atomic<const DeviceMetrics*> devices_{nullptr};
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int64_t>, std::unique_ptr<ModelMetrics>> models_;
};

}  // namespace convoy::serve
