#include "apps/serve/connection_table.h"

#include <sys/resource.h>

#include <algorithm>
#include <vector>

namespace convoy::serve {

int64_t default_max_connections() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 4096;
  const auto soft = static_cast<int64_t>(std::min<rlim_t>(limit.rlim_cur, rlim_t{1} << 30));
  // 64 descriptors for the process itself (stdio and logs, the listening sockets, Asio's epoll,
  // eventfd and timers, a checkpoint being read, the CUDA driver's device files) and a quarter of
  // the rest for what the cap does not count: gRPC's connections. Never above 4096: each connection
  // holds a 64 KiB read buffer (256 MiB at 4096), and a pod behind a load balancer needs far fewer.
  return std::clamp(soft - 64 - soft / 4, int64_t{8}, int64_t{4096});
}

ConnectionTable::ConnectionTable(int64_t max_connections, ServerMetrics& metrics)
    : max_(max_connections), metrics_(metrics) {
  metrics_.max_connections = max_;
}

constexpr int64_t kMaxShedding = 32;  // connections closing at once, at most

bool ConnectionTable::admit(const std::shared_ptr<TrackedConnection>& c) {
  std::shared_ptr<TrackedConnection> victim;
  {
    std::lock_guard lock(mutex_);
    if (static_cast<int64_t>(open_.size()) - shedding_ >= max_) {
      // A shed connection holds its descriptor until its own thread closes it: in a burst of new
      // connections the ones still closing would add up past the descriptors the cap leaves.
      if (shedding_ >= kMaxShedding) {
        metrics_.refused++;
        return false;
      }
      victim = pick_victim(c.get());
      if (!victim) {
        metrics_.refused++;
        return false;
      }
    }
    open_.emplace(c.get(), c);
    metrics_.connections = static_cast<int64_t>(open_.size()) - shedding_;
  }
  // Outside the lock: the last reference to a connection may be dropped here, and its
  // destructor calls remove().
  if (victim) victim->shed();
  return true;
}

void ConnectionTable::remove(TrackedConnection* c) {
  std::lock_guard lock(mutex_);
  if (open_.erase(c) == 0) return;
  if (c->shedding_) shedding_--;
  metrics_.connections = static_cast<int64_t>(open_.size()) - shedding_;
}

bool ConnectionTable::shed_one() {
  std::shared_ptr<TrackedConnection> victim;
  {
    std::lock_guard lock(mutex_);
    victim = pick_victim(nullptr);
  }
  if (victim) victim->shed();
  return victim != nullptr;
}

std::shared_ptr<TrackedConnection> ConnectionTable::pick_victim(const TrackedConnection* spare) {
  // The one waiting longest without a request being handled: an idle keep-alive connection and
  // a slowloris trickle alike have waited since their last request was answered or their current
  // one began; a connection busy with a request is never cut off. Raw pointers are safe here:
  // a connection leaves open_ (under the lock) before it is freed.
  TrackedConnection* oldest = nullptr;
  for (const auto& [raw, weak] : open_) {
    if (raw == spare || raw->shedding_ || raw->phase_ == ConnectionPhase::busy) continue;
    if (!oldest || raw->since_ns_ < oldest->since_ns_) oldest = raw;
  }
  if (!oldest) return nullptr;
  std::shared_ptr<TrackedConnection> victim = open_.at(oldest).lock();
  if (!victim) return nullptr;  // being destroyed: it is leaving by itself
  victim->shedding_ = true;
  shedding_++;
  (victim->phase_ == ConnectionPhase::idle ? metrics_.shed_idle : metrics_.shed_slow)++;
  metrics_.connections = static_cast<int64_t>(open_.size()) - shedding_;
  return victim;
}

}  // namespace convoy::serve
