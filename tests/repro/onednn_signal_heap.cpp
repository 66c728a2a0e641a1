// oneDNN alone, no Convoy code: its x64 f32 GEMM (the "nocopy" kernels of oneDNN up to 3.11.1,
// Debian's 2.6.3 among them) points the stack register into a heap workspace while it runs
// (oneDNN issue 4845). A signal handler that interrupts it pushes its frame there, and a later
// free() aborts: "corrupted size vs. prev_size while consolidating", "free(): invalid pointer",
// a SIGSEGV or a hang in an OpenMP barrier. This was the flaky SIGTERM end-to-end test; Convoy
// now takes SIGTERM/SIGINT on a sigwait thread (engine/core/stop_signals.h) and never runs a
// handler. Built and run by scripts/repro-onednn-signal-heap.sh.
//
//   onednn_signal_heap MODE SECONDS
//   MODE handler: SIGUSR1 has an empty handler (as a std::signal SIGTERM handler had);
//        sigwait: SIGUSR1 is blocked in every thread and taken by sigwait (Convoy's way).
// A thread sends SIGUSR1 every 200 us while the main thread runs GEMMs of the shape of
// Convoy's LeNet-5 fc1 forward at batch 64, (64 x 800) x (800 x 500), which takes the heap
// path on AVX2 and AVX-512. Exits 0 with a line of counts when the run ends clean.
#include <dnnl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

std::atomic<long> handled{0};
void on_signal(int) { handled.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "handler") != 0 && std::strcmp(argv[1], "sigwait") != 0)) {
    std::fprintf(stderr, "usage: %s handler|sigwait SECONDS\n", argv[0]);
    return 64;
  }
  const bool use_handler = std::strcmp(argv[1], "handler") == 0;
  const double seconds = std::atof(argv[2]);
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  if (use_handler) {
    struct sigaction action{};
    action.sa_handler = on_signal;
    sigaction(SIGUSR1, &action, nullptr);
  } else {
    pthread_sigmask(SIG_BLOCK, &usr1, nullptr);  // before any other thread, so all inherit it
    std::thread([&] {
      for (int signal = 0; sigwait(&usr1, &signal) == 0;) handled++;
    }).detach();
  }
  const int m = 64, n = 500, k = 800;
  std::vector<float> a(m * k, 0.5f), b(k * n, 0.25f), c(m * n);
  std::atomic<bool> done{false};
  long sent = 0;
  std::thread sender([&] {
    while (!done) {
      kill(getpid(), SIGUSR1);
      ++sent;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  long gemms = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    // Heap traffic between the GEMMs, so a chunk header written over is met by malloc and free.
    auto* scratch = new std::vector<float>(1024 + gemms % 512);
    if (dnnl_sgemm('N', 'N', m, n, k, 1.f, a.data(), k, b.data(), n, 0.f, c.data(), n) != dnnl_success) return 3;
    delete scratch;
    ++gemms;
  }
  done = true;
  sender.join();
  for (const float v : c)
    if (v != 0.5f * 0.25f * k) {
      std::printf("wrong result %g\n", v);
      return 2;
    }
  std::printf("%s: %ld GEMMs, %ld signals sent, %ld handled, clean\n", argv[1], gemms, sent, handled.load());
  return 0;
}
