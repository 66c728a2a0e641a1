#include "apps/serve/worker_pool.h"

#include <algorithm>

#include "engine/core/usable_cpus.h"

namespace convoy::serve {

namespace {
thread_local bool t_on_worker = false;
}  // namespace

WorkerPool::WorkerPool(int threads, size_t max_queued, ServerMetrics& metrics)
    : max_queued_(max_queued), metrics_(metrics) {
  // Half the CPUs: the other half runs the I/O threads and the models; at most 8, since each
  // worker may hold a request's decoded images (up to the image byte budget) at once.
  const int n = threads > 0 ? threads : std::clamp(usable_cpus() / 2, 2, 8);
  metrics_.worker_threads = n;
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { loop(); });
}

WorkerPool::~WorkerPool() { stop(); }

bool WorkerPool::on_worker() { return t_on_worker; }

bool WorkerPool::try_submit(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      if (admitted_ >= max_queued_) {
        metrics_.worker_rejected++;
        return false;
      }
      queue_.push_back({std::move(task), true});
      metrics_.worker_queue = static_cast<int64_t>(++admitted_);
      wake_.notify_one();
      return true;
    }
  }
  task();
  return true;
}

void WorkerPool::post(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      queue_.push_back({std::move(task), false});
      wake_.notify_one();
      return;
    }
  }
  task();
}

void WorkerPool::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::loop() {
  t_on_worker = true;
  for (;;) {
    Entry e;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      e = std::move(queue_.front());
      queue_.pop_front();
      if (e.admitted) metrics_.worker_queue = static_cast<int64_t>(--admitted_);
    }
    try {
      e.task();
    } catch (...) {
      // Every task answers its own errors (routes.cpp); nothing may end a worker.
    }
  }
}

}  // namespace convoy::serve
