#pragma once
// The KServe v2 REST endpoints (and /metrics, and classify), independent of the network code:
// a request in, a reply out through a callback that may run on another thread. The Router
// dispatches through the table of endpoints (apps/serve/endpoints.h), answering the cheap ones at
// once and handing the heavy ones (inference, classify, load and unload) to the worker pool.
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "apps/serve/endpoints.h"
#include "apps/serve/memory_release.h"
#include "apps/serve/metrics.h"
#include "apps/serve/repository.h"
#include "apps/serve/shared_memory.h"
#include "apps/serve/worker_pool.h"

namespace convoy::serve {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query
  ReleaseAfterRequest release;  // the body's bytes as received and inflated: before `body`, freed after it
  std::string body;
  std::optional<size_t> inference_header_length;  // the Inference-Header-Content-Length header
};

struct HttpReply {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::optional<size_t> inference_header_length;
  std::string model;  // for the request log
};

// Called once with the reply, from any thread.
using ReplyFn = std::function<void(HttpReply)>;

// What an endpoint's path captured.
struct RouteMatch {
  std::string model;
  int64_t version = 0;  // 0: the newest ready version
  std::string region;   // a shared-memory region's name; empty: every region
};

class Router {
 public:
  // `shm`: the shared-memory regions, which the gRPC endpoint serves too. Without `workers`
  // everything runs on the calling thread.
  Router(ModelRepository& repository, MetricsRegistry& metrics, const std::atomic<bool>& ready,
         std::shared_ptr<SharedMemoryRegistry> shm = std::make_shared<SharedMemoryRegistry>(),
         WorkerPool* workers = nullptr)
      : repository_(repository), metrics_(metrics), ready_(ready), shm_(std::move(shm)), workers_(workers) {}
  void handle(HttpRequest request, ReplyFn reply);
  // The metrics port's only endpoint.
  void handle_metrics(const HttpRequest& request, ReplyFn reply);
  // The bytes reading one infer request's JSON may take (TensorSpec::memory_budget); 0: each
  // model's default.
  void set_request_memory_budget(uint64_t bytes) { request_memory_budget_ = bytes; }
  WorkerPool* workers() const { return workers_; }
  MetricsRegistry& metrics() const { return metrics_; }

 private:
  // The endpoint's handler.
  void serve(Operation operation, const RouteMatch& m, HttpRequest& request, const std::string& query,
             const ReplyFn& reply);
  void infer(const std::string& model, int64_t version, const HttpRequest& request, const ReplyFn& reply);
  void classify(const std::string& model, int64_t version, HttpRequest& request, int64_t top_k, const ReplyFn& reply);
  HttpReply metadata_reply(const std::string& model, int64_t version);
  HttpReply config_reply(const std::string& model, int64_t version);

  ModelRepository& repository_;
  MetricsRegistry& metrics_;
  const std::atomic<bool>& ready_;
  uint64_t request_memory_budget_ = 0;
  std::shared_ptr<SharedMemoryRegistry> shm_;
  WorkerPool* workers_;
};

// Runs `work`, answering what it throws as every endpoint does: a RequestError with its status,
// another Error 400, out of memory 503, anything else 500.
void answer_errors(const ReplyFn& reply, const std::function<void()>& work);

// A KServe error reply: {"error": "..."}.
HttpReply error_reply(unsigned status, const std::string& message);
// The 503 of a request the workers' queue has no room for.
HttpReply workers_busy_reply(const WorkerPool& workers);

// A shared-memory endpoint's reply (Operation::system_shm_status ... cuda_shm_unregister) for
// `region` (empty: every region) and the request's `body` (a register's JSON); errors are replies.
HttpReply shared_memory_reply(SharedMemoryRegistry& shm, Operation operation, const std::string& region,
                              const std::string& body);

}  // namespace convoy::serve
