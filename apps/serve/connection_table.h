#pragma once
// The HTTP connections open at once, as a budget: at the cap, a new connection takes the place
// of the one that has waited longest without a request being handled (idle keep-alive, or a
// request or reply trickling through, as slowloris does), so that a health probe always gets in
// and descriptors never run out under a flood of idle sockets.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "apps/serve/metrics.h"

namespace convoy::serve {

enum class ConnectionPhase : int {
  idle,     // waiting for a request's first byte
  reading,  // a request's headers or body on the way
  busy,     // its request being handled: never shed
  writing,  // its reply on the way
};

// A connection the table can close to make room.
class TrackedConnection {
 public:
  virtual ~TrackedConnection() = default;
  // Closes the connection, from its own executor; called at most once, from any thread.
  virtual void shed() = 0;
  void set_phase(ConnectionPhase phase) {
    since_ns_ = now_ns();
    phase_ = phase;
  }

 private:
  friend class ConnectionTable;
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  std::atomic<ConnectionPhase> phase_{ConnectionPhase::idle};
  std::atomic<int64_t> since_ns_{now_ns()};
  bool shedding_ = false;  // guarded by the table's mutex
};

// The default --max-connections: what RLIMIT_NOFILE's soft limit leaves after a reserve.
int64_t default_max_connections();

class ConnectionTable {
 public:
  ConnectionTable(int64_t max_connections, ServerMetrics& metrics);
  // Registers `c`, shedding another at the cap; false (c not registered) when every other
  // connection is busy, and the caller closes c.
  bool admit(const std::shared_ptr<TrackedConnection>& c);
  // From c's destructor.
  void remove(TrackedConnection* c);
  // Sheds the connection waiting longest (accept ran out of descriptors); false when none can go.
  bool shed_one();

 private:
  // Marks the connection to shed (under the lock); null when none can go.
  std::shared_ptr<TrackedConnection> pick_victim(const TrackedConnection* spare);

  const int64_t max_;
  ServerMetrics& metrics_;
  std::mutex mutex_;
  std::unordered_map<TrackedConnection*, std::weak_ptr<TrackedConnection>> open_;
  int64_t shedding_ = 0;  // in open_, closing
};

}  // namespace convoy::serve
