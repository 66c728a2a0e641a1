#pragma once
// SIGTERM and SIGINT taken by a thread of their own (sigwait) instead of a signal handler.
//
// Why not a handler: oneDNN's x64 f32 GEMM kernels (oneDNN up to 3.11.1, Debian's 2.6 among
// them) point the stack register into a heap buffer while they run (oneDNN issue 4845). A
// signal delivered to such a thread pushes its frame onto "the stack", that is into the heap,
// and a later free() aborts with "corrupted size vs. prev_size". Blocked in every thread, the
// signals never interrupt a kernel; a watcher thread waits for them instead.
//
//   BlockedStopSignals blocked;              // first, before any other thread starts
//   ... start the work's threads ...
//   StopSignalWatcher watcher(on_signal);   // after what on_signal uses: it goes first
#include <atomic>
#include <csignal>
#include <functional>
#include <thread>

namespace convoy {

// Blocks SIGTERM and SIGINT in this thread, and so in every thread it starts later (OpenMP's,
// a loader's, a server's); the destructor restores this thread's mask, after which a stop
// signal has its default effect (the process ends).
class BlockedStopSignals {
 public:
  BlockedStopSignals();
  ~BlockedStopSignals();
  BlockedStopSignals(const BlockedStopSignals&) = delete;
  BlockedStopSignals& operator=(const BlockedStopSignals&) = delete;

 private:
  sigset_t previous_{};
};

// The watcher thread's name (/proc/<pid>/task/<tid>/comm; 15 characters at most).
inline constexpr char kStopSignalWatcherName[] = "convoy-signals";

// A thread that waits for SIGTERM and SIGINT and calls on_signal(signal) for each, outside any
// signal handler. Needs them blocked (BlockedStopSignals) in every thread; the signals that
// came before it started are not lost. The destructor stops and joins it.
class StopSignalWatcher {
 public:
  explicit StopSignalWatcher(std::function<void(int)> on_signal);
  ~StopSignalWatcher();
  StopSignalWatcher(const StopSignalWatcher&) = delete;
  StopSignalWatcher& operator=(const StopSignalWatcher&) = delete;

 private:
  std::function<void(int)> on_signal_;
  std::atomic<bool> closing_{false};  // set before the destructor wakes the thread
  std::thread thread_;
};

}  // namespace convoy
