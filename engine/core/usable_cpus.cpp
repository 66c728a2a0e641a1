#include "engine/core/usable_cpus.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace convoy {

namespace fs = std::filesystem;

namespace {

// Keeps the smaller of two limits, where either is there.
void keep_smaller(std::optional<double>& smallest, std::optional<double> limit) {
  if (limit && (!smallest || *limit < *smallest)) smallest = limit;
}

std::optional<std::string> first_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

std::optional<double> positive(const std::string& text) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used != text.size() || !std::isfinite(v) || v <= 0) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// cgroup v2: cpu.max is "QUOTA PERIOD" or "max PERIOD".
std::optional<double> v2_limit(const fs::path& dir) {
  const auto line = first_line(dir / "cpu.max");
  if (!line) return std::nullopt;
  std::istringstream in(*line);
  std::string quota, period;
  if (!(in >> quota >> period)) return std::nullopt;
  const auto q = positive(quota), p = positive(period);
  if (!q || !p) return std::nullopt;  // "max": no limit
  return *q / *p;
}

// cgroup v1: cpu.cfs_quota_us (-1: no limit) and cpu.cfs_period_us.
std::optional<double> v1_limit(const fs::path& dir) {
  const auto quota = first_line(dir / "cpu.cfs_quota_us"), period = first_line(dir / "cpu.cfs_period_us");
  if (!quota || !period) return std::nullopt;
  const auto q = positive(*quota), p = positive(*period);
  if (!q || !p) return std::nullopt;
  return *q / *p;
}

// The smallest limit from `leaf` up to `mount` (a parent's limit binds its children too). In a
// container the cgroup path is often the host's (/docker/<id>) while the mount shows only the
// container's own cgroup: where the path is not there, the mount's root is.
template <class Limit>
std::optional<double> smallest_up_to(const fs::path& mount, const std::string& cgroup_path, Limit limit) {
  std::error_code ec;
  if (!fs::is_directory(mount, ec)) return std::nullopt;
  const fs::path relative = fs::path(cgroup_path).relative_path();
  // A path outside this cgroup namespace ("/../..") or not mounted here: the mount's root.
  const bool outside = std::find(relative.begin(), relative.end(), fs::path("..")) != relative.end();
  fs::path dir = relative.empty() || outside ? mount : mount / relative;
  if (!fs::is_directory(dir, ec)) dir = mount;
  std::optional<double> smallest;
  for (;;) {
    keep_smaller(smallest, limit(dir));
    if (dir == mount || !dir.has_parent_path() || dir.parent_path() == dir) break;
    dir = dir.parent_path();
  }
  return smallest;
}

}  // namespace

int CpuBudget::usable() const {
  if (!quota) return affinity;
  return std::clamp(static_cast<int>(std::floor(*quota)), 1, std::max(1, affinity));
}

std::optional<double> cgroup_cpu_quota(std::string_view proc_self_cgroup, const fs::path& cgroup_root) {
  std::optional<double> smallest;
  std::istringstream lines{std::string(proc_self_cgroup)};
  for (std::string line; std::getline(lines, line);) {
    // "ID:CONTROLLERS:PATH"; v2's is "0::PATH".
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty()) {
      keep_smaller(smallest, smallest_up_to(cgroup_root, path, v2_limit));  // the unified hierarchy
      keep_smaller(smallest, smallest_up_to(cgroup_root / "unified", path, v2_limit));  // hybrid systems
      continue;
    }
    std::istringstream list(controllers);
    for (std::string c; std::getline(list, c, ',');)
      if (c == "cpu") {
        // Mounted as "cpu" or "cpu,cpuacct" (with a "cpu" link to it on most systems).
        keep_smaller(smallest, smallest_up_to(cgroup_root / "cpu", path, v1_limit));
        if (controllers != "cpu") keep_smaller(smallest, smallest_up_to(cgroup_root / controllers, path, v1_limit));
      }
  }
  return smallest;
}

namespace {

std::vector<int> thread_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

bool set_thread_cpus(const std::vector<int>& cpus) {
  if (cpus.empty()) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

}  // namespace

std::vector<int> process_cpus() {
  if (omp_get_proc_bind() != omp_proc_bind_false && omp_get_num_places() > 0) {
    std::vector<int> cpus;
    for (int p = 0; p < omp_get_num_places(); ++p) {
      std::vector<int> ids(static_cast<size_t>(std::max(0, omp_get_place_num_procs(p))));
      if (!ids.empty()) omp_get_place_proc_ids(p, ids.data());
      cpus.insert(cpus.end(), ids.begin(), ids.end());
    }
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    if (!cpus.empty()) return cpus;
  }
  return thread_cpus();
}

ProcessCpusScope::ProcessCpusScope() {
  std::vector<int> mine = thread_cpus(), all = process_cpus();
  if (mine != all && set_thread_cpus(all)) previous_ = std::move(mine);
}

ProcessCpusScope::~ProcessCpusScope() {
  if (!previous_.empty()) set_thread_cpus(previous_);
}

CpuBudget cpu_budget() {
  CpuBudget b;
  const std::vector<int> cpus = process_cpus();
  b.affinity = cpus.empty() ? std::max(1, static_cast<int>(std::thread::hardware_concurrency()))
                            : static_cast<int>(cpus.size());
  std::ifstream in("/proc/self/cgroup");
  const std::string cgroups{std::istreambuf_iterator<char>(in), {}};
  b.quota = cgroup_cpu_quota(cgroups, "/sys/fs/cgroup");
  return b;
}

}  // namespace convoy
