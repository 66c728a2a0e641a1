#include "apps/bench/thread_times.h"

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cstdio>

namespace convoy {

ThreadTimes ThreadTimes::operator-(const ThreadTimes& before) const {
  ThreadTimes d;
  d.known = known && before.known;
  d.on_cpu = on_cpu - before.on_cpu;
  d.runnable = runnable - before.runnable;
  d.minor_faults = minor_faults - before.minor_faults;
  d.major_faults = major_faults - before.major_faults;
  d.involuntary_switches = involuntary_switches - before.involuntary_switches;
  return d;
}

ThreadTimes this_thread_times() {
  ThreadTimes t;
  // schedstat: nanoseconds on a CPU, nanoseconds waiting on a run queue, time slices. Its first
  // field lags a running thread by up to a scheduler tick, so the CPU time comes from the thread's
  // clock (exact); the wait is booked whenever the thread gets a CPU, so it is current here.
  if (FILE* f = std::fopen("/proc/thread-self/schedstat", "re")) {
    unsigned long long run_ns = 0, wait_ns = 0;
    timespec cpu{};
    t.known = std::fscanf(f, "%llu %llu", &run_ns, &wait_ns) == 2 && clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0;
    std::fclose(f);
    t.on_cpu = static_cast<double>(cpu.tv_sec) + static_cast<double>(cpu.tv_nsec) * 1e-9;
    t.runnable = static_cast<double>(wait_ns) * 1e-9;
  }
  rusage u{};
  if (getrusage(RUSAGE_THREAD, &u) == 0) {
    t.minor_faults = u.ru_minflt;
    t.major_faults = u.ru_majflt;
    t.involuntary_switches = u.ru_nivcsw;
  }
  return t;
}

nlohmann::json slow_samples(const std::vector<double>& latencies, const std::vector<ThreadTimes>& times,
                            double median, double factor) {
  const double bar = factor * median;
  int64_t count = 0, split = 0, minor = 0, major = 0, preempted = 0;
  double wall = 0, split_wall = 0, on_cpu = 0, runnable = 0;
  for (size_t i = 0; i < latencies.size(); ++i) {
    if (latencies[i] <= bar) continue;
    ++count;
    wall += latencies[i];
    if (i >= times.size() || !times[i].known) continue;
    ++split;
    split_wall += latencies[i];
    on_cpu += times[i].on_cpu;
    runnable += times[i].runnable;
    minor += times[i].minor_faults;
    major += times[i].major_faults;
    preempted += times[i].involuntary_switches;
  }
  if (count == 0) return nullptr;
  nlohmann::json j = {{"over_median_times", factor}, {"count", count}, {"wall_ms", wall * 1e3}};
  if (split > 0) {
    // The books are read just outside each sample's clock: clamp so the three parts sum to its wall.
    on_cpu = std::min(on_cpu, split_wall);
    runnable = std::min(runnable, split_wall - on_cpu);
    j["split"] = {{"samples", split},
                  {"wall_ms", split_wall * 1e3},
                  {"on_cpu_ms", on_cpu * 1e3},
                  {"waiting_for_cpu_ms", runnable * 1e3},
                  {"blocked_ms", (split_wall - on_cpu - runnable) * 1e3},
                  {"minor_faults", minor},
                  {"major_faults", major},
                  {"preemptions", preempted}};
  }
  return j;
}

}  // namespace convoy
