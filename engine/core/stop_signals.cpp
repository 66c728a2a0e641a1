#include "engine/core/stop_signals.h"

#include <pthread.h>

#include "engine/core/error.h"

namespace convoy {

namespace {

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

BlockedStopSignals::BlockedStopSignals() {
  const sigset_t set = stop_set();
  if (pthread_sigmask(SIG_BLOCK, &set, &previous_) != 0) throw DeviceError("cannot block SIGTERM and SIGINT");
}

BlockedStopSignals::~BlockedStopSignals() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }

StopSignalWatcher::StopSignalWatcher(std::function<void(int)> on_signal) : on_signal_(std::move(on_signal)) {
  sigset_t current;
  pthread_sigmask(SIG_BLOCK, nullptr, &current);
  CONVOY_CHECK(sigismember(&current, SIGTERM) && sigismember(&current, SIGINT),
               "StopSignalWatcher without BlockedStopSignals: a handler-less signal would end the process");
  thread_ = std::thread([this] {
    // Named, so that a check (the e2e signal tests), gdb and `top -H` tell it from the threads
    // that must keep the signals blocked: waiting in sigwait, it shows them unblocked in
    // /proc/<pid>/task/<tid>/status.
    pthread_setname_np(pthread_self(), kStopSignalWatcherName);
    const sigset_t set = stop_set();
    for (;;) {
      int signal = 0;
      if (sigwait(&set, &signal) != 0) continue;
      if (closing_) return;
      on_signal_(signal);
    }
  });
}

StopSignalWatcher::~StopSignalWatcher() {
  // The destructor's own SIGTERM, sent to the watcher thread alone, ends its wait.
  closing_ = true;
  pthread_kill(thread_.native_handle(), SIGTERM);
  thread_.join();
}

}  // namespace convoy
