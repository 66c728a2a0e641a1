#pragma once
// The job's meeting point over TCP, torchrun-style: rank 0 listens on MASTER_PORT, every other
// rank connects to MASTER_ADDR:MASTER_PORT and says its rank, and once all have joined rank 0
// sends each the same bytes (NCCL's unique id). The connections then stay open for the whole
// run as a liveness channel: the kernel closes a dead process's sockets, so rank 0 learns at
// once which rank is gone and tells the others, and they learn when rank 0 is.
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/distributed/world.h"

namespace convoy {

class Rendezvous {
 public:
  // Rank 0 serves `payload` (other ranks pass anything); returns once every rank has joined
  // (rank 0) or the payload arrived (the others). Not all joined within `timeout`: a
  // DeviceError naming the ranks that did not (rank 0) or the address that did not answer.
  Rendezvous(const WorldInfo& world, const std::string& payload, std::chrono::milliseconds timeout);
  ~Rendezvous();  // says goodbye (a clean end, not a failure) and closes the connections
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  const std::string& payload() const { return payload_; }

  // Watches the connections on a thread of its own; `on_lost(rank)` is called (once, from
  // that thread) when a rank's process is gone without saying goodbye.
  void monitor(std::function<void(int rank)> on_lost);
  // Ends the run cleanly: the peers will not take this process's exit for a failure.
  void goodbye();

 private:
  void watch();
  void serve(std::chrono::steady_clock::time_point deadline);
  void join(std::chrono::steady_clock::time_point deadline);

  WorldInfo world_;
  std::string payload_;
  int listen_fd_ = -1;
  std::vector<int> peers_;  // rank 0: by rank (its own slot -1); others: one, rank 0's
  std::vector<bool> done_;  // said goodbye or lost: no longer watched
  std::function<void(int)> on_lost_;
  std::thread watcher_;
  std::atomic<bool> stop_{false};
  std::mutex send_mutex_;
  bool said_goodbye_ = false;
};

}  // namespace convoy
