#pragma once
// How many CPUs this process can keep busy: those of its affinity mask (a container's
// --cpuset-cpus, taskset), and fewer where a CPU quota allows fewer (`docker run --cpus 2`, a
// Kubernetes CPU limit: the cgroup's CFS quota). OpenMP and std::thread::hardware_concurrency
// see only the first; 16 threads on a 2-CPU quota spend most of each period throttled.
#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

namespace convoy {

struct CpuBudget {
  int affinity = 1;             // CPUs the process may run on (process_cpus)
  std::optional<double> quota;  // CPUs' worth of time per period, where a cgroup limits it
  int usable() const;           // affinity, or the quota rounded down (at least 1) if smaller
};

// This process's budget, from its CPUs (below), /proc/self/cgroup and /sys/fs/cgroup.
CpuBudget cpu_budget();
inline int usable_cpus() { return cpu_budget().usable(); }

// The CPUs this process may run on. Usually the calling thread's affinity mask; but where
// OpenMP binds its threads (OMP_PROC_BIND, OMP_PLACES), it pins the initial thread to the
// first place as the program starts, so the process's CPUs are then the union of OpenMP's
// places (made from the mask it found before pinning).
std::vector<int> process_cpus();

// Gives the calling thread all of process_cpus() for the scope's lifetime, then its own mask
// back: a child started meanwhile (an exec of Convoy itself, a benchmark peer) inherits the
// process's CPUs, not the one that OpenMP pinned this thread to.
class ProcessCpusScope {
 public:
  ProcessCpusScope();
  ~ProcessCpusScope();
  ProcessCpusScope(const ProcessCpusScope&) = delete;
  ProcessCpusScope& operator=(const ProcessCpusScope&) = delete;

 private:
  std::vector<int> previous_;  // empty: nothing to restore
};

// The quota part, for tests: the smallest CPU limit on the way from the process's cgroup up to
// the root (cgroup v2's cpu.max; v1's cpu.cfs_quota_us / cpu.cfs_period_us), given the
// contents of /proc/self/cgroup and where the cgroup file systems are mounted. Unreadable or
// malformed files count as no limit.
std::optional<double> cgroup_cpu_quota(std::string_view proc_self_cgroup, const std::filesystem::path& cgroup_root);

}  // namespace convoy
