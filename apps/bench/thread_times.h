#pragma once
// Where a slow latency sample's time went, from the kernel's books on the timing thread: on a
// CPU, runnable but waiting for one (another process or cgroup had it), or neither (blocked:
// sleeping in a futex, a page fault's I/O, a throttled CPU quota). On shared cores (issue 39)
// a p99 far above the p50 is one of these three, and each has a different cure.
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace convoy {

// The calling thread's totals so far (/proc/thread-self/schedstat and getrusage(RUSAGE_THREAD));
// `known` is false where the kernel does not keep them (no /proc, no schedstat).
struct ThreadTimes {
  bool known = false;
  double on_cpu = 0;    // seconds run
  double runnable = 0;  // seconds spent runnable on a run queue, waiting for a CPU
  int64_t minor_faults = 0, major_faults = 0;
  int64_t involuntary_switches = 0;  // preemptions: the CPU taken away while runnable

  ThreadTimes operator-(const ThreadTimes& before) const;
};

ThreadTimes this_thread_times();

// The latency samples over `factor` times `median` (theirs, as the record's p50), with their
// wall time split by the thread's books (`times[i]` belongs to `latencies[i]`; samples whose
// times are not known are counted but not split). Null when no sample is that slow.
nlohmann::json slow_samples(const std::vector<double>& latencies, const std::vector<ThreadTimes>& times,
                            double median, double factor);

}  // namespace convoy
