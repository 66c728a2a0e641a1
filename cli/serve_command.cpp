// convoy serve --model-repository REPO [--http-port 8000] [--metrics-port 8002] ...
#include "cli/commands.h"
#include "engine/core/error.h"

#ifdef CONVOY_HAVE_SERVE
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "apps/serve/device_metrics.h"
#include "apps/serve/grpc_endpoint.h"
#include "apps/serve/http_server.h"
#include "apps/serve/log_settings.h"
#include "apps/serve/memory_release.h"
#include "apps/serve/repository.h"
#include "apps/serve/routes.h"
#include "apps/serve/worker_pool.h"
#include "apps/serve/trace.h"
#include "cli/commands.h"
#include "engine/core/error.h"
#include "engine/core/stop_signals.h"

namespace convoy::cli {

namespace {

struct ServeArgs {
  std::string repository;
  std::string model_control = "none";
  std::vector<std::string> load_models;
  int64_t poll_secs = 15;
  std::string host = "0.0.0.0";
  int http_port = 8000;
  int grpc_port = 8001;
  int metrics_port = 8002;
  bool allow_metrics = true;
  bool allow_gpu_metrics = true;
  bool allow_cpu_metrics = true;
  int64_t metrics_interval_ms = 2000;
  bool allow_grpc = true;
  int64_t http_threads = 0;
  int64_t drain_secs = 30;
  int64_t max_input_bytes = int64_t{64} << 20;
  int64_t max_request_memory = 0;
  bool log_requests = false;
  int64_t max_connections = 0;
  int64_t header_timeout_secs = 10;
  int64_t worker_threads = 0;
  int64_t worker_queue = 512;
  serve::ImageBudget images;
  serve::LogSettings log;
  std::vector<std::string> trace_config;
};

// Redirects std::cerr into a stream for as long as it lives.
class RedirectCerr {
 public:
  explicit RedirectCerr(std::ostream& to) : old_(std::cerr.rdbuf(to.rdbuf())) {}
  ~RedirectCerr() { std::cerr.rdbuf(old_); }

 private:
  std::streambuf* old_;
};

// Polls the repository every `secs` on a thread of its own until destroyed.
class Poller {
 public:
  Poller(serve::ModelRepository& repository, int64_t secs, serve::ServeLog& log)
      : thread_([this, &repository, secs, &log] {
      std::unique_lock lock(mutex_);
      while (!wake_.wait_for(lock, std::chrono::seconds(secs), [this] { return stop_; })) {
        lock.unlock();
        try {
          repository.poll();
        } catch (const std::exception& e) {
          log.message(serve::LogSeverity::error, std::string("convoy serve: repository poll failed: ") + e.what());
        }
        lock.lock();
      }
    }) {}
  ~Poller() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

int run_serve(const ServeArgs& args, const EngineOptions& engine) {
  // Before the first thread starts (see stop_signals.h for why not a handler).
  BlockedStopSignals blocked;
  serve::configure_serving_heap();
  const serve::ModelControl control = args.model_control == "poll"       ? serve::ModelControl::poll
                                      : args.model_control == "explicit" ? serve::ModelControl::explicit_
                                                                         : serve::ModelControl::none;
  if (!args.load_models.empty() && control != serve::ModelControl::explicit_)
    throw InputError("--load-model needs --model-control explicit");
  serve::MetricsRegistry metrics;
  serve::ServeLog& log = metrics.log();
  serve::LogSettings log_settings = args.log;
  if (args.log_requests) log_settings.verbose_level = std::max<uint32_t>(log_settings.verbose_level, 1);
  log.configure(log_settings);
  metrics.tracer().configure(serve::parse_trace_config(args.trace_config));
  // What other code writes to std::cerr while serving (the engine's notices of a fallback, the HTTP
  // server's stop lines) follows the log's settings as a warning.
  RedirectCerr redirect(log.stream(serve::LogSeverity::warning));
  // The GPUs' and the host's samples for /metrics, taken on a thread of their own (never on a
  // request's path); the GPUs' ids also name the GPU each model runs on.
  std::unique_ptr<serve::DeviceMetrics> devices;
  if (args.allow_metrics && (args.allow_gpu_metrics || args.allow_cpu_metrics)) {
    serve::DeviceMetricsOptions device_options;
    device_options.gpu = args.allow_gpu_metrics;
    device_options.cpu = args.allow_cpu_metrics;
    device_options.interval = std::chrono::milliseconds(args.metrics_interval_ms);
    device_options.gpu_uuids = serve::cuda_gpu_uuids();
    devices = std::make_unique<serve::DeviceMetrics>(device_options, log.stream(serve::LogSeverity::info));
    metrics.set_device_metrics(devices.get());
  }
  serve::ModelRepository repository(args.repository, control, metrics, log.stream(serve::LogSeverity::info), engine,
                                    &log.stream(serve::LogSeverity::error));
  repository.set_image_budget(args.images);
  std::atomic<bool> ready{false};
  auto shared_memory = std::make_shared<serve::SharedMemoryRegistry>();  // HTTP's and gRPC's
  serve::WorkerPool workers(static_cast<int>(args.worker_threads), static_cast<size_t>(args.worker_queue),
                            metrics.server());
  serve::Router router(repository, metrics, ready, shared_memory, &workers);
  router.set_request_memory_budget(static_cast<uint64_t>(args.max_request_memory));
  serve::HttpOptions options;
  options.host = args.host;
  options.http_port = args.http_port;
  options.metrics_port = args.allow_metrics ? args.metrics_port : -1;
  options.threads = static_cast<int>(args.http_threads);
  options.drain = std::chrono::seconds(args.drain_secs);
  options.max_body_bytes = static_cast<uint64_t>(args.max_input_bytes);
  options.max_connections = args.max_connections;
  options.header_timeout = std::chrono::seconds(args.header_timeout_secs);
  options.log = &log;
  // Listening first: a port in use fails at once, before any model is loaded.
  serve::HttpServer server(router, options, ready);
  StopSignalWatcher watcher([&server](int signal) { server.stop(signal); });
  std::string grpc_why;
  std::unique_ptr<serve::GrpcEndpoint> grpc =
      args.allow_grpc
          ? serve::start_grpc_endpoint(repository, metrics, ready, *shared_memory, args.host, args.grpc_port, grpc_why)
          : nullptr;
  if (args.allow_grpc && !grpc && grpc_why.find("not built in") == std::string::npos) throw InputError(grpc_why);
  repository.load_initial(args.load_models);
  log.message(serve::LogSeverity::info, "convoy serve: at most " + std::to_string(server.max_connections()) +
                                           " HTTP connections, " + std::to_string(workers.threads()) + " request workers");
  std::ostringstream started;
  started << "convoy serve: HTTP on " << args.host << ":" << server.http_port();
  if (server.metrics_port() >= 0) started << ", metrics on " << args.host << ":" << server.metrics_port();
  if (grpc)
    started << ", gRPC on " << args.host << ":" << grpc->port();
  else if (args.allow_grpc)
    started << " (no gRPC: " << grpc_why << ")";
  log.message(serve::LogSeverity::info, started.str());
  ready = true;
  {
    std::optional<Poller> poller;
    if (control == serve::ModelControl::poll) poller.emplace(repository, args.poll_secs, log);
    server.run();
  }
  if (grpc) grpc->shutdown();  // calls in flight finish: the models still run
  repository.stop_all();  // before the server goes: completions post to its executor
  workers.stop();         // the replies of the last completions, before the router goes
  log.message(serve::LogSeverity::info, "convoy serve: stopped");
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, Action& chosen) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve a model repository over the KServe v2 protocol (Triton's layout)");
  cmd->add_option("--model-repository", args->repository, "REPO/<model>/config.yaml, REPO/<model>/<version>/model.safetensors")
      ->required();
  cmd->add_option("--model-control", args->model_control, "none: load all at start; poll: follow the folder; explicit: the load/unload API")
      ->check(CLI::IsMember({"none", "poll", "explicit"}))
      ->capture_default_str();
  cmd->add_option("--load-model", args->load_models, "with explicit: models to load at start");
  cmd->add_option("--repository-poll-secs", args->poll_secs, "with poll: seconds between scans")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  cmd->add_option("--host", args->host, "address to listen on")->capture_default_str();
  cmd->add_option("--http-port", args->http_port, "KServe v2 HTTP/REST port (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--grpc-port", args->grpc_port, "KServe v2 gRPC port (0: any free port)")->check(CLI::Range(0, 65535))->capture_default_str();
  cmd->add_option("--metrics-port", args->metrics_port, "Prometheus /metrics port (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--allow-metrics", args->allow_metrics, "serve /metrics")->capture_default_str();
  // Triton's options for the sampled metrics: GPUs through NVML (the driver's libnvidia-ml.so.1,
  // where there is one), the host's CPU and memory from /proc.
  cmd->add_option("--allow-gpu-metrics", args->allow_gpu_metrics, "nv_gpu_* and nv_energy_consumption in /metrics")
      ->capture_default_str();
  cmd->add_option("--allow-cpu-metrics", args->allow_cpu_metrics, "nv_cpu_* in /metrics")->capture_default_str();
  cmd->add_option("--metrics-interval-ms", args->metrics_interval_ms, "how often the GPU and CPU metrics are sampled")
      ->check(CLI::Range(int64_t{10}, int64_t{86400000}))
      ->capture_default_str();
  cmd->add_option("--allow-grpc", args->allow_grpc, "serve gRPC (when built in)")->capture_default_str();
  cmd->add_option("--http-thread-count", args->http_threads, "HTTP I/O threads (0: by the cores)")
      ->check(CLI::Range(0, 256))
      ->capture_default_str();
  cmd->add_option("--exit-timeout-secs", args->drain_secs, "after SIGTERM: how long requests in flight may take")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  // Triton's option: it bounds a request body both as sent and once a gzip/deflate body is inflated.
  cmd->add_option("--http-max-input-size", args->max_input_bytes, "largest HTTP request body in bytes, after decompression")
      ->check(CLI::Range(int64_t{1}, int64_t{2147483647}))
      ->capture_default_str();
  // Ours: what reading a request's JSON may take beyond its body, checked as it is read.
  cmd->add_option("--http-max-request-memory", args->max_request_memory,
                  "bytes reading an HTTP infer request's JSON may take, else 413 (0: per model, its input at max "
                  "batch as FP32 plus 1 MiB)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->capture_default_str();
  cmd->add_flag("--log-requests", args->log_requests, "one JSON line per request on stdout (--log-verbose 1)");
  // Triton's logging options; GET/POST /v2/logging reads and changes all but the file while serving.
  cmd->add_option("--log-file", args->log.file, "write the log (messages and request lines) to this file");
  cmd->add_option("--log-info", args->log.info, "log info messages")->capture_default_str();
  cmd->add_option("--log-warning", args->log.warning, "log warnings")->capture_default_str();
  cmd->add_option("--log-error", args->log.error, "log errors")->capture_default_str();
  cmd->add_option("--log-verbose", args->log.verbose_level, "verbose level: 1 and more logs each HTTP request")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  cmd->add_option("--log-format", args->log.format, "default, or ISO8601 (a timestamp, severity and pid first)")
      ->check(CLI::IsMember({"default", "ISO8601"}))
      ->capture_default_str();
  cmd->add_option("--trace-config", args->trace_config,
                  "Triton's trace settings: level=OFF|TIMESTAMPS, rate=N, count=N, triton,file=PATH, "
                  "triton,log-frequency=N (repeat the option)");
  cmd->add_option("--max-connections", args->max_connections,
                  "HTTP connections open at once; at the cap the longest idle or slow one is closed for a new one "
                  "(0: three quarters of the open files limit, less 64, at most 4096)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--http-header-timeout-secs", args->header_timeout_secs,
                  "seconds from a request's first byte to the end of its headers")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--worker-thread-count", args->worker_threads,
                  "threads that parse requests, decode images and build replies (0: half the cores, 2 to 8)")
      ->check(CLI::Range(0, 256))
      ->capture_default_str();
  cmd->add_option("--worker-queue-size", args->worker_queue, "requests that may wait for a worker; more get 503")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--max-image-pixels", args->images.max_pixels, "pixels of a request's encoded images, from their headers (413 over it)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  cmd->add_option("--max-image-bytes", args->images.max_bytes,
                  "decoded bytes of a request's images, 16-bit samples and alpha counted (413 over it)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  cmd->callback([args, &chosen] { chosen = [args](const EngineOptions& engine) { return run_serve(*args, engine); }; });
}

}  // namespace convoy::cli

#else  // built without Boost: the command is there and says why it cannot serve

namespace convoy::cli {

void add_serve_command(CLI::App& app, Action& chosen) {
  CLI::App* cmd = app.add_subcommand("serve", "Serve a model repository (not in this build: no Boost)");
  cmd->allow_extras();
  cmd->callback([&chosen] {
    chosen = [](const EngineOptions&) -> int {
      throw InputError("this convoy was built without Boost (libboost-dev), so without `convoy serve`: "
                       "install libboost-dev and rebuild");
    };
  });
}

}  // namespace convoy::cli

#endif
