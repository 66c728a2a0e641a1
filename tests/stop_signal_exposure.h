#pragma once
// Shared by the tests that stop a running `convoy train` with a signal: whether a SIGTERM or
// SIGINT could interrupt one of its threads. A handler run on a thread inside oneDNN 2.6's
// AVX-512 f32 GEMM writes its frame into the heap (engine/core/stop_signals.h): the flaky
// 'corrupted size vs. prev_size' of the SIGTERM test. Read from /proc, as the kernel sees it.
#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "engine/core/stop_signals.h"

namespace convoy::testing {

// A signal set of a /proc status file ("SigBlk", "SigCgt"); nullopt when it cannot be read
// (the thread ended meanwhile).
inline std::optional<uint64_t> proc_signal_set(const std::filesystem::path& status, const std::string& field) {
  std::ifstream in(status);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1), nullptr, 16);
  return std::nullopt;
}

// Whether process `pid` has its stop-signal watcher thread: from then on a stop signal means
// "checkpoint and stop"; before (the dynamic loader, the re-exec, the config), it ends the
// process, which under load can take more than the few seconds a test would otherwise sleep.
inline bool has_stop_signal_watcher(pid_t pid) {
  std::error_code error;
  for (const std::filesystem::directory_entry& task :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", error)) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (std::getline(comm, name) && name == kStopSignalWatcherName) return true;
  }
  return false;
}

// What lets a stop signal run on process `pid`'s threads, "" when nothing does: a handler
// installed for SIGTERM or SIGINT, a thread other than the watcher with either unblocked, or
// not exactly one watcher thread (it alone shows them unblocked, while it waits in sigwait).
inline std::string stop_signal_exposure(pid_t pid) {
  namespace fs = std::filesystem;
  const fs::path proc = "/proc/" + std::to_string(pid);
  constexpr uint64_t kStop = (uint64_t{1} << (SIGTERM - 1)) | (uint64_t{1} << (SIGINT - 1));
  std::string problems;
  if (proc_signal_set(proc / "status", "SigCgt").value_or(0) & kStop)
    problems += "a handler is installed for SIGTERM or SIGINT; ";
  int watchers = 0;
  std::error_code error;
  for (const fs::directory_entry& task : fs::directory_iterator(proc / "task", error)) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    const std::optional<uint64_t> blocked = proc_signal_set(task.path() / "status", "SigBlk");
    if (!blocked) continue;
    if (name == kStopSignalWatcherName)
      ++watchers;
    else if ((*blocked & kStop) != kStop)
      problems += "thread " + task.path().filename().string() + " (" + name + ") takes SIGTERM or SIGINT; ";
  }
  if (error) problems += "cannot list " + (proc / "task").string() + ": " + error.message() + "; ";
  if (watchers != 1) problems += std::to_string(watchers) + " threads named " + kStopSignalWatcherName + ", not 1; ";
  return problems;
}

}  // namespace convoy::testing
