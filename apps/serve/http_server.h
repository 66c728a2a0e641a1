#pragma once
// The HTTP/REST front end on Boost.Beast over Asio: the KServe v2 port and the metrics port,
// a pool of I/O threads that only read, write and answer the cheap endpoints (the router hands
// the rest to its workers), a cap on open connections, and a graceful stop (stop accepting, let the requests in flight
// finish within a bound, then return) when the command's stop signal watcher calls stop().
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "apps/serve/log_settings.h"
#include "apps/serve/routes.h"

namespace convoy::serve {

struct HttpOptions {
  std::string host = "0.0.0.0";
  int http_port = 8000;     // 0: any free port (the bound one is printed)
  int metrics_port = 8002;  // -1: no metrics port
  int threads = 0;          // I/O threads; 0: two, or more on a bigger machine
  uint64_t max_body_bytes = uint64_t{64} << 20;
  int64_t max_connections = 0;  // open at once, both ports; 0: default_max_connections()
  // From a request's first byte to the end of its headers; distinct from the keep-alive idle
  // timeout (60 s), so that a client trickling headers (slowloris) cannot hold a connection.
  std::chrono::seconds header_timeout{10};
  std::chrono::seconds drain{30};  // how long in-flight requests may take after a stop signal
  ServeLog* log = nullptr;         // one JSON line per request there, at verbose level 1 or more
};

class HttpServer {
 public:
  HttpServer(Router& router, const HttpOptions& options, std::atomic<bool>& ready);
  ~HttpServer();
  int http_port() const;
  int metrics_port() const;
  int64_t max_connections() const;  // the cap in force
  // Serves until stop(), then drains the requests in flight and returns.
  void run();
  // Asks run() to stop as after `signal` (SIGTERM, SIGINT); from any thread, before or
  // during run(), once or more.
  void stop(int signal);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace convoy::serve
