#pragma once
// The host's CPU time and memory as Triton's CPU metrics count them (nv_cpu_utilization,
// nv_cpu_memory_total_bytes, nv_cpu_memory_used_bytes), read from /proc/stat and /proc/meminfo.
// Parsing is apart from reading so that it is tested on text of our own.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace convoy::serve {

// The aggregate "cpu " line of /proc/stat, in clock ticks since boot. guest and guest_nice are
// left out: the kernel counts them in user and nice already.
struct CpuTimes {
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
};

// The "cpu " line of a /proc/stat text; nullopt where there is none or it has fewer than the four
// fields every kernel writes (user nice system idle; older kernels stop there, the rest count 0).
std::optional<CpuTimes> parse_proc_stat(std::string_view text);

// The busy fraction of the time between two readings, in [0, 1]: user, nice, system, irq, softirq
// and steal over those plus idle and iowait, as Triton counts it. A counter that went backwards
// (a reading of another boot, say) counts 0; 0 where no tick passed.
double cpu_utilization(const CpuTimes& before, const CpuTimes& after);

struct HostMemory {
  uint64_t total = 0;  // MemTotal, bytes
  uint64_t used = 0;   // MemTotal - MemAvailable (what a new process cannot have), bytes
};

// MemTotal and MemAvailable of a /proc/meminfo text; nullopt where either is missing or
// unreadable, or MemAvailable exceeds MemTotal.
std::optional<HostMemory> parse_meminfo(std::string_view text);

// The text of a /proc file (whose size stat() does not tell); empty where it cannot be read.
std::string read_proc_file(const char* path);

}  // namespace convoy::serve
