// The dynamic batcher's side of a ServedVersion: the queue requests wait in, and the batches the
// instances take from it (served_model.cpp runs them).
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "apps/serve/served_model.h"

namespace convoy::serve {

namespace {

int64_t us_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::microseconds>(b - a).count();
}

}  // namespace

size_t ServedVersion::queued() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

bool ServedVersion::submit(InferJob job) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || static_cast<int64_t>(queue_.size()) >= config_.max_queue_size) return false;
    if (config_.default_timeout_us > 0 && job.deadline == Clock::time_point::max())
      job.deadline = deadline_after(job.enqueued, config_.default_timeout_us);
    queue_.push_back(std::move(job));
    metrics_.queue_size = static_cast<int64_t>(queue_.size());
  }
  wake_.notify_one();
  return true;
}

std::vector<InferJob> ServedVersion::next_batch(bool wait_for_work) {
  std::vector<InferJob> batch, expired;
  bool more = false;
  {
    std::unique_lock lock(mutex_);
    if (wait_for_work) wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return batch;
    const int kind = queue_.front().kind();
    // Samples queued that could join the first job's batch, in order.
    auto available = [&] {
      int64_t n = 0;
      for (const InferJob& j : queue_) {
        if (j.kind() != kind || n + j.rows() > config_.max_batch_size) break;
        n += j.rows();
      }
      return n;
    };
    if (config_.dynamic_batching && config_.max_queue_delay_us > 0) {
      const int64_t target =
          config_.preferred_batch_size.empty() ? config_.max_batch_size : config_.preferred_batch_size.back();
      const Clock::time_point until = queue_.front().enqueued + std::chrono::microseconds(config_.max_queue_delay_us);
      wake_.wait_until(lock, until, [&] { return stopping_ || queue_.empty() || available() >= target; });
      if (queue_.empty()) return batch;  // another instance took them
    }
    // The largest preferred size the queue can fill, else as many as fit.
    int64_t cap = config_.dynamic_batching ? config_.max_batch_size : queue_.front().rows();
    const int64_t have = available();
    for (auto it = config_.preferred_batch_size.rbegin(); it != config_.preferred_batch_size.rend(); ++it)
      if (*it <= have) {
        cap = *it;
        break;
      }
    const Clock::time_point now = Clock::now();
    int64_t n = 0;
    while (!queue_.empty()) {
      InferJob& j = queue_.front();
      if (j.deadline <= now) {
        expired.push_back(std::move(j));
        queue_.pop_front();
        continue;
      }
      if (j.kind() != kind || (n > 0 && n + j.rows() > cap)) break;
      n += j.rows();
      batch.push_back(std::move(j));
      queue_.pop_front();
    }
    metrics_.queue_size = static_cast<int64_t>(queue_.size());
    more = !queue_.empty();
  }
  if (more) wake_.notify_one();  // another instance may take the rest
  for (InferJob& j : expired) {
    metrics_.request_failure++;
    j.done({InferResult::Status::timeout, "the request timed out after " +
                                              std::to_string(us_between(j.enqueued, Clock::now())) +
                                              " us in the queue", {}, {}});
  }
  return batch;
}

}  // namespace convoy::serve
