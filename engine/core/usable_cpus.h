#pragma once
// How many CPUs this process can keep busy: those of its affinity mask (a container's
// --cpuset-cpus, taskset), and fewer where a CPU quota allows fewer (`docker run --cpus 2`, a
// Kubernetes CPU limit: the cgroup's CFS quota). OpenMP and std::thread::hardware_concurrency
// see only the first; 16 threads on a 2-CPU quota spend most of each period throttled.
#include <filesystem>
#include <optional>
#include <string_view>

namespace convoy {

struct CpuBudget {
  int affinity = 1;             // CPUs in the affinity mask
  std::optional<double> quota;  // CPUs' worth of time per period, where a cgroup limits it
  int usable() const;           // affinity, or the quota rounded down (at least 1) if smaller
};

// This process's budget, from sched_getaffinity, /proc/self/cgroup and /sys/fs/cgroup.
CpuBudget cpu_budget();
inline int usable_cpus() { return cpu_budget().usable(); }

// The quota part, for tests: the smallest CPU limit on the way from the process's cgroup up to
// the root (cgroup v2's cpu.max; v1's cpu.cfs_quota_us / cpu.cfs_period_us), given the
// contents of /proc/self/cgroup and where the cgroup file systems are mounted. Unreadable or
// malformed files count as no limit.
std::optional<double> cgroup_cpu_quota(std::string_view proc_self_cgroup, const std::filesystem::path& cgroup_root);

}  // namespace convoy
