// BlockedStopSignals and StopSignalWatcher (engine/core/stop_signals.h): SIGTERM and SIGINT
// reach the watcher's callback on its own thread, never a handler on a thread that runs
// oneDNN. Each case runs in a child process (a death-test fork): a process-directed signal
// must find no other thread with the signals unblocked, which the test runner's OpenMP
// threads from earlier cases would be.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <vector>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "engine/backends/backend.h"
#include "engine/core/error.h"
#include "engine/core/stop_signals.h"

namespace {

using namespace std::chrono_literals;
using convoy::BlockedStopSignals;
using convoy::StopSignalWatcher;

// Waits up to 5 s for `done`.
template <class Done>
bool eventually(Done done) {
  for (auto until = std::chrono::steady_clock::now() + 5s; std::chrono::steady_clock::now() < until;) {
    if (done()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return done();
}

// Ends the child: 0 when `ok`, else 1 after printing why (the parent shows stderr).
[[noreturn]] void child_exit(bool ok, const char* why) {
  if (!ok) std::fprintf(stderr, "%s\n", why);
  std::fflush(stderr);
  std::_Exit(ok ? 0 : 1);
}

void watcher_gets_both_signals_on_its_own_thread() {
  BlockedStopSignals blocked;
  std::atomic<int> terms{0}, ints{0};
  std::atomic<bool> on_main{false};
  const std::thread::id main_id = std::this_thread::get_id();
  {
    StopSignalWatcher watcher([&](int signal) {
      if (std::this_thread::get_id() == main_id) on_main = true;
      (signal == SIGTERM ? terms : ints)++;
    });
    kill(getpid(), SIGTERM);
    if (!eventually([&] { return terms == 1; })) child_exit(false, "SIGTERM did not reach the watcher");
    kill(getpid(), SIGINT);
    if (!eventually([&] { return ints == 1; })) child_exit(false, "SIGINT did not reach the watcher");
  }  // the destructor's wake-up is not a stop signal
  child_exit(terms == 1 && ints == 1 && !on_main, "wrong count, or the callback ran on the main thread");
}

TEST(StopSignals, TheWatcherGetsSigtermAndSigintOnItsOwnThread) {
  EXPECT_EXIT(watcher_gets_both_signals_on_its_own_thread(), testing::ExitedWithCode(0), "");
}

void later_threads_inherit_the_block() {
  BlockedStopSignals blocked;
  bool inherited = false;
  std::thread([&] {
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, nullptr, &mask);
    inherited = sigismember(&mask, SIGTERM) && sigismember(&mask, SIGINT);
  }).join();
  child_exit(inherited, "a thread started after BlockedStopSignals takes SIGTERM/SIGINT");
}

TEST(StopSignals, ThreadsStartedLaterHaveTheSignalsBlocked) {
  EXPECT_EXIT(later_threads_inherit_the_block(), testing::ExitedWithCode(0), "");
}

// Named, so that /proc (the e2e signal tests' check, tests/stop_signal_exposure.h), gdb and
// `top -H` tell the one thread that shows the signals unblocked (while in sigwait) from the rest.
TEST(StopSignals, TheWatcherThreadCarriesItsName) {
  BlockedStopSignals blocked;
  StopSignalWatcher watcher([](int) {});
  const auto named = [] {
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
      std::ifstream comm(task.path() / "comm");
      std::string name;
      if (std::getline(comm, name) && name == convoy::kStopSignalWatcherName) return true;
    }
    return false;
  };
  EXPECT_TRUE(eventually(named)) << "no thread named " << convoy::kStopSignalWatcherName;
}

TEST(StopSignals, AWatcherWithoutTheBlockIsRefused) {
  // Without the block a stop signal would find a thread with the default action and end the
  // process instead of reaching the watcher.
  EXPECT_THROW(StopSignalWatcher([](int) {}), convoy::InternalError);
}

// The bug this replaced: oneDNN's f32 GEMM kernels (a CPU linear layer) point the stack
// register into the heap, so a signal handler that interrupts one writes its frame there and
// the heap is corrupted (oneDNN issue 4845; it failed the SIGTERM test once in ~40 runs). Here
// a thread sends SIGTERM every 200 us while the main thread runs a linear layer's GEMMs; with
// a std::signal handler instead of the watcher this process died of SIGSEGV within 0.2 s in
// 4 of 4 tries (2026-12-01, AVX-512 VM), and with this shape in 3 of 3 under each of
// ONEDNN_MAX_CPU_ISA=AVX512_CORE and AVX2 (not under SSE41, whose GEMM leaves the stack
// register alone; 2026-12-04); with the watcher it runs to the end.
void gemms_under_a_signal_storm() {
  BlockedStopSignals blocked;
  std::atomic<int> received{0};
  StopSignalWatcher watcher([&](int) { received++; });
  auto backend = convoy::make_cpu_backend({});
  // LeNet-5's fc1 at batch 64 (models/lenet5.yaml): a shape whose GEMM takes the heap path on
  // AVX2 as well as AVX-512 (64x120x400 does only on AVX-512, so on a CPU without it this test
  // could not fail).
  const auto x = convoy::Tensor::zeros({64, 800});  // (N, in)
  const auto w = convoy::Tensor::zeros({500, 800});  // (out, in)
  auto y = convoy::Tensor::zeros({64, 500});  // (N, out)
  std::atomic<bool> done{false};
  int sent = 0;
  std::thread sender([&] {
    while (!done) {
      kill(getpid(), SIGTERM);
      ++sent;
      std::this_thread::sleep_for(200us);
    }
  });
  const auto until = std::chrono::steady_clock::now() + 700ms;
  while (std::chrono::steady_clock::now() < until) backend->ops().linear_forward(x, w, convoy::Tensor(), y);
  done = true;
  sender.join();
  // Signals of one kind that arrive together merge, so fewer may be counted than sent.
  if (!eventually([&] { return received > 0; })) child_exit(false, "no SIGTERM reached the watcher");
  child_exit(received <= sent, "more signals counted than sent");
}

TEST(StopSignals, CpuGemmsUnderASignalStormRunToTheEnd) {
  EXPECT_EXIT(gemms_under_a_signal_storm(), testing::ExitedWithCode(0), "");
}

}  // namespace
