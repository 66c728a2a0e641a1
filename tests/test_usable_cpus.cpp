// The CPUs a process may keep busy: its affinity and a cgroup's CPU quota. The readers on
// cgroup trees the tests write (v1, v2, a hybrid system, nested limits, malformed files), and,
// where this machine lets the test make a cgroup (root and a writable cgroup file system),
// `convoy doctor` run inside one limited to one CPU; with OpenMP binding threads, `convoy doctor`
// and a benchmark peer keep every CPU.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/core/usable_cpus.h"
#include "tests/run_command.h"
#include "tests/temp_dir.h"

using namespace convoy;
namespace fs = std::filesystem;

namespace {

void put(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text << "\n";
}

class UsableCpus : public ::testing::Test {
 protected:
  convoy::testing::TempDir root_{"convoy-cgroups"};
};

}  // namespace

TEST_F(UsableCpus, CgroupV2TakesTheSmallestLimitOnTheWayToTheRoot) {
  const fs::path r = root_.path();
  put(r / "kubepods/pod1/cpu.max", "200000 100000");  // the pod: 2 CPUs
  put(r / "kubepods/pod1/ctr/cpu.max", "max 100000");   // the container: no limit of its own
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota("0::/kubepods/pod1/ctr\n", r).value(), 2.0);
  put(r / "kubepods/pod1/ctr/cpu.max", "50000 100000");
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota("0::/kubepods/pod1/ctr\n", r).value(), 0.5);
  EXPECT_FALSE(cgroup_cpu_quota("0::/elsewhere\n", r).has_value());  // not there: the root's, none
  put(r / "cpu.max", "max 100000");
  EXPECT_FALSE(cgroup_cpu_quota("0::/\n", r).has_value());
  // In a container the path is often the host's, and the mount the container's own cgroup.
  put(r / "cpu.max", "150000 100000");
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota("0::/docker/0123abcd\n", r).value(), 1.5);
  // Outside the cgroup namespace the path climbs above its root: the mount's root counts.
  put(r / "ns/cpu.max", "300000 100000");
  put(r / "x/cpu.max", "100000 100000");  // beside the mount: never read
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota("0::/../x\n", r / "ns").value(), 3.0);
}

TEST_F(UsableCpus, CgroupV1AndHybridSystems) {
  const fs::path r = root_.path();
  put(r / "cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "300000");
  put(r / "cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000");
  const std::string v1 = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n";
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota(v1, r).value(), 3.0);
  put(r / "cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1");  // no limit
  EXPECT_FALSE(cgroup_cpu_quota(v1, r).has_value());
  // A hybrid system: v1 controllers beside the unified hierarchy in unified/.
  put(r / "unified/user.slice/cpu.max", "250000 100000");
  EXPECT_DOUBLE_EQ(cgroup_cpu_quota("1:cpu:/\n0::/user.slice\n", r).value(), 2.5);
}

TEST_F(UsableCpus, MalformedOrMissingFilesMeanNoLimit) {
  const fs::path r = root_.path();
  for (const std::string bad : {"", "abc 100000", "100000", "0 100000", "100000 0", "-5 100000", "1e999 100000",
                                "nan 100000", "100000 100000 extra"}) {
    put(r / "cpu.max", bad);
    const auto q = cgroup_cpu_quota("0::/\n", r);
    if (bad == "100000 100000 extra")
      EXPECT_DOUBLE_EQ(q.value_or(-1), 1.0) << "the first two fields are the format; more may follow";
    else
      EXPECT_FALSE(q.has_value()) << "'" << bad << "'";
  }
  EXPECT_FALSE(cgroup_cpu_quota("", r).has_value());
  EXPECT_FALSE(cgroup_cpu_quota("garbage without colons\n", r).has_value());
  EXPECT_FALSE(cgroup_cpu_quota("0::/\n", r / "does-not-exist").has_value());
}

TEST(UsableCpusBudget, TheQuotaRoundsDownAndNeverExceedsTheAffinity) {
  EXPECT_EQ((CpuBudget{4, std::nullopt}).usable(), 4);
  EXPECT_EQ((CpuBudget{4, 8.0}).usable(), 4);
  EXPECT_EQ((CpuBudget{4, 2.7}).usable(), 2);
  EXPECT_EQ((CpuBudget{4, 0.3}).usable(), 1);
  const CpuBudget here = cpu_budget();
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_EQ(here.affinity, CPU_COUNT(&set));
  EXPECT_GE(here.usable(), 1);
  EXPECT_LE(here.usable(), here.affinity);
}

// `convoy doctor` in a cgroup of its own with a quota of one CPU: OpenMP gets one thread.
TEST(UsableCpusCli, DoctorInACgroupWithAOneCpuQuotaRunsOneOpenMpThread) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  if (CPU_COUNT(&set) < 2) GTEST_SKIP() << "one CPU here: a one-CPU quota would change nothing";
  const std::string name = "convoy-test-" + std::to_string(getpid());
  // cgroup v2 (the quota in cpu.max), else v1's cpu controller.
  fs::path dir;
  std::string quota_file, quota;
  std::error_code ec;
  if (fs::exists("/sys/fs/cgroup/cgroup.controllers") && fs::create_directory("/sys/fs/cgroup/" + name, ec)) {
    dir = "/sys/fs/cgroup/" + name;
    quota_file = "cpu.max";
    quota = "100000 100000";
  } else if (fs::is_directory("/sys/fs/cgroup/cpu") && fs::create_directory("/sys/fs/cgroup/cpu/" + name, ec)) {
    dir = "/sys/fs/cgroup/cpu/" + name;
    quota_file = "cpu.cfs_quota_us";
    quota = "100000";  // the period's default is 100000
  } else {
    GTEST_SKIP() << "cannot make a cgroup here (not root, or no writable cgroup file system): " << ec.message();
  }
  {
    std::ofstream q(dir / quota_file);
    q << quota << std::flush;
    if (!q) {
      fs::remove(dir, ec);
      GTEST_SKIP() << "cannot set a CPU quota in " << dir << " (the cpu controller is not enabled there)";
    }
  }
  const convoy::testing::CommandResult r = convoy::testing::run_command(
      "env -u OMP_NUM_THREADS sh -c 'echo $$ > " + (dir / "cgroup.procs").string() + " && exec " +
      std::string(CONVOY_BINARY) + " doctor' 2>&1");
  fs::remove(dir, ec);  // empty again once the child has exited
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("CPU threads: 1 (OpenMP)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("a CPU quota of 1 CPUs (cgroup)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("CPU threads, why: 1: the cgroup's CPU quota of 1 CPUs, rounded down"), std::string::npos)
      << r.output;
  // Outside it, OpenMP takes what this test's own cgroup and affinity allow (a CI runner may
  // have a quota of its own).
  const auto outside = convoy::testing::run_command("env -u OMP_NUM_THREADS " + std::string(CONVOY_BINARY) + " doctor 2>&1");
  EXPECT_NE(outside.output.find("CPU threads: " + std::to_string(usable_cpus()) + " (OpenMP)"), std::string::npos)
      << outside.output;
}

// The calling thread's CPUs as /proc lists them ("0-1"), for comparing with a child's.
static std::string cpus_allowed_list(const std::string& status_text) {
  const std::string key = "Cpus_allowed_list:";
  const size_t at = status_text.find(key);
  if (at == std::string::npos) return "";
  const size_t from = status_text.find_first_not_of(" \t", at + key.size());
  return status_text.substr(from, status_text.find('\n', from) - from);
}

// OMP_PROC_BIND pins OpenMP's initial thread to its first place as the program starts. Convoy
// re-executes itself (to set OpenMP's wait policy) and starts benchmark peers: both used to
// inherit that one CPU, so a bound `convoy bench` ran one thread's worth on one CPU and so did
// its peers. Now OpenMP keeps every CPU (one place per core), and so does a peer.
TEST(UsableCpusCli, BoundOpenMpThreadsAndBenchPeersKeepEveryCpu) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const int cpus = CPU_COUNT(&set);
  if (cpus < 2) GTEST_SKIP() << "one CPU here: binding could not lose any";
  std::ifstream self("/proc/self/status");
  const std::string mine = cpus_allowed_list(std::string(std::istreambuf_iterator<char>(self), {}));
  ASSERT_FALSE(mine.empty());
  const std::string bound = "env -u OMP_NUM_THREADS -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY OMP_PROC_BIND=close "
                            "OMP_PLACES=threads ";
  const auto doctor = convoy::testing::run_command(bound + std::string(CONVOY_BINARY) + " doctor 2>&1");
  ASSERT_EQ(doctor.status, 0) << doctor.output;
  EXPECT_NE(doctor.output.find("CPU threads: " + std::to_string(usable_cpus()) + " (OpenMP)"), std::string::npos)
      << doctor.output;
  EXPECT_NE(doctor.output.find(std::to_string(cpus) + " in this process's affinity"), std::string::npos)
      << doctor.output;

  // A stand-in for the peers' Python that writes down the CPUs it was started with.
  convoy::testing::TempDir dir{"convoy-bound-bench"};
  const fs::path python = dir.path() / "python", seen = dir.path() / "seen.txt";
  std::ofstream(python) << "#!/bin/sh\ngrep Cpus_allowed_list /proc/self/status >> '" << seen.string() << "'\n";
  fs::permissions(python, fs::perms::owner_all);
  const auto bench = convoy::testing::run_command(
      bound + "CONVOY_PYTHON=" + python.string() + " " + std::string(CONVOY_BINARY) + " bench --suite " +
      std::string(CONVOY_SOURCE_DIR) + "/benchmarks/suites/quick.yaml --devices cpu --peers onnxruntime --quick --out " +
      (dir.path() / "out").string() + " 2>&1");
  ASSERT_EQ(bench.status, 0) << bench.output;
  EXPECT_NE(bench.output.find(std::to_string(cpus) + " threads"), std::string::npos) << bench.output;
  std::ifstream in(seen);
  const std::string lines{std::istreambuf_iterator<char>(in), {}};
  ASSERT_FALSE(lines.empty()) << "the stand-in peer did not run:\n" << bench.output;
  std::istringstream each(lines);
  for (std::string line; std::getline(each, line);) EXPECT_EQ(cpus_allowed_list(line + "\n"), mine) << line;
}
