#pragma once
// The threads that do a request's heavy work, so that the HTTP I/O threads only move bytes and
// answer the cheap endpoints (health, metadata, metrics): parsing and inflating bodies, checking
// and decoding images, building replies. New requests wait in a bounded queue (a full one is a
// 503 at once); the rest of a request already taken (its reply, once the model has run) never
// waits behind that bound.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "apps/serve/metrics.h"

namespace convoy::serve {

class WorkerPool {
 public:
  // `threads` 0: by the usable CPUs.
  WorkerPool(int threads, size_t max_queued, ServerMetrics& metrics);
  ~WorkerPool();  // stop()
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues a new request's work; false (nothing queued) when `max_queued` are waiting.
  bool try_submit(std::function<void()> task);
  // Queues the rest of a request already taken, whatever the queue holds.
  void post(std::function<void()> task);
  // Runs what is queued, then joins the threads; later tasks run on the caller's thread.
  void stop();
  int threads() const { return static_cast<int>(threads_.size()); }
  size_t max_queued() const { return max_queued_; }
  // Whether the calling thread is one of a pool's.
  static bool on_worker();

 private:
  struct Entry {
    std::function<void()> task;
    bool admitted;  // a new request's work, which max_queued_ bounds
  };
  void loop();

  const size_t max_queued_;
  ServerMetrics& metrics_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Entry> queue_;
  size_t admitted_ = 0;  // entries of queue_ that are new requests
  bool stopping_ = false;
  std::vector<std::thread> threads_;  // last: they start once the members above exist
};

}  // namespace convoy::serve
