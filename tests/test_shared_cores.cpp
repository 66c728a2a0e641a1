// CPU inference on shared cores (issue 39): the team chooser's decisions on pass times fed to it
// (no timing here), `convoy bench --contend`'s option and its busy processes, which must be gone
// when the bench ends, fails, or is killed.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "apps/bench/contention.h"
#include "engine/core/error.h"
#include "engine/inference/team_chooser.h"
#include "tests/run_command.h"
#include "tests/temp_dir.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;

// Feeds `passes` back-to-back passes to the chooser: `team_seconds(threads, i)` is pass i's time
// at that team, during which the team gets `cpu_share` of its cores' time (1: free cores) and
// `idle_cores` of the machine's cores are idle (negative: the machine's idle time unknown).
// Counts the pass seconds spent in teams other than the one chosen at the time (tries).
struct Feed {
  TeamChooser chooser;
  TeamChooser::Usage usage;
  double total = 0, tried = 0;
  int tries_started = 0;

  explicit Feed(int threads) : chooser(threads) {}
  template <class Time>
  void run(int passes, Time team_seconds, double cpu_share, double idle_cores = -1) {
    for (int i = 0; i < passes; ++i) {
      const bool was_probing = chooser.probing();
      const double s = team_seconds(chooser.threads(), i);
      usage.wall += s;
      usage.cpu += s * cpu_share * chooser.threads();
      usage.idle = idle_cores < 0 ? -1 : std::max(usage.idle, 0.0) + s * idle_cores;
      total += s;
      if (was_probing) tried += s;
      chooser.record(s, [this] { return usage; });
      if (!was_probing && chooser.probing()) ++tries_started;
    }
  }
};

TEST(TeamChooser, TeamsHalveDownToOne) {
  EXPECT_EQ(TeamChooser(16).teams(), (std::vector<int>{16, 8, 4, 2, 1}));
  EXPECT_EQ(TeamChooser(6).teams(), (std::vector<int>{6, 3, 1}));
  EXPECT_EQ(TeamChooser(1).teams(), (std::vector<int>{1}));
}

TEST(TeamChooser, AQuietMachineNeverTriesAnotherTeam) {
  Feed f(2);
  // Steady passes, a slow first few (page faults), the cores all the team's.
  f.run(5000, [](int threads, int i) { return (i < 4 ? 5e-3 : 1e-3) * (threads == 2 ? 1.0 : 1.9); }, 1.0);
  EXPECT_EQ(f.tries_started, 0);
  EXPECT_EQ(f.chooser.chosen(), 2);
}

// A team of 2 beside a busy process: most passes fast, every fourth stalled for a time slice,
// the team getting half its cores' time; one thread alone keeps its core.
double contended(int threads, int i) { return threads == 2 ? (i % 4 == 3 ? 12e-3 : 0.6e-3) : 1.5e-3; }

TEST(TeamChooser, ContentionMovesToTheSmallerTeamAndTriesBackWithinTheBudget) {
  Feed f(2);
  f.run(200, contended, 0.5);
  EXPECT_EQ(f.chooser.chosen(), 1);
  // Staying there: the tries of the full team lose, and cost about 1% of the time.
  f.total = f.tried = 0;
  f.tries_started = 0;
  f.run(100000, contended, 0.5);
  EXPECT_EQ(f.chooser.chosen(), 1);
  EXPECT_GE(f.tries_started, 1);
  EXPECT_LE(f.tried / f.total, 0.02) << f.tries_started << " tries";
  // The cores free up: the next try of the full team wins.
  f.run(100000, [](int threads, int) { return threads == 2 ? 0.8e-3 : 1.5e-3; }, 1.0);
  EXPECT_EQ(f.chooser.chosen(), 2);
}

TEST(TeamChooser, WithoutAnIdleCoreTheLargerTeamIsNotTriedAndWithOneItIsAtOnce) {
  Feed f(2);
  // Beside a busy process no core is idle: at the team of 1, no try of the team of 2 (its
  // stalled passes would only lengthen the tail) for as long as that lasts.
  f.run(200, contended, 0.5, 0.0);
  EXPECT_EQ(f.chooser.chosen(), 1);
  f.tries_started = 0;
  f.run(100000, contended, 0.5, 0.0);
  EXPECT_EQ(f.chooser.chosen(), 1);
  EXPECT_EQ(f.tries_started, 0);
  // The other process stops and a core is idle: the team of 2 is tried within a few blocks, and kept.
  int passes = 0;
  for (; f.chooser.chosen() == 1 && passes < 1000; ++passes)
    f.run(1, [](int threads, int) { return threads == 2 ? 0.8e-3 : 1.5e-3; }, 1.0, 1.0);
  EXPECT_EQ(f.chooser.chosen(), 2);
  EXPECT_LT(passes, 100);
}

TEST(TeamChooser, ATeamShortOfCpuTriesASmallerOneAndKeepsItselfWhenThatIsSlower) {
  Feed f(4);
  // Uniformly slow passes (no spread to see) but the team short of CPU: the half team is tried,
  // runs slower still, and is not kept; the tries back off.
  f.run(3000, [](int threads, int) { return threads == 4 ? 2e-3 : 3.5e-3; }, 0.6);
  EXPECT_EQ(f.chooser.chosen(), 4);
  EXPECT_GE(f.tries_started, 1);
  EXPECT_LE(f.tried / f.total, 0.03);
}

TEST(TeamChooser, UnderContentionASmallerTeamNoSlowerIsKeptForItsSteadierPasses) {
  Feed f(2);
  // The team of 2 beside a busy process: a mean of 2 ms, every fourth pass stalled 5 ms. One
  // thread runs a steady 1.9 ms: hardly faster on average (a larger team would need 15% to win),
  // but without the stalls, so it is kept, and the tries of the team of 2 that follow lose.
  const auto time = [](int threads, int i) { return threads == 2 ? (i % 4 == 3 ? 5e-3 : 1e-3) : 1.9e-3; };
  f.run(400, time, 0.5);
  EXPECT_EQ(f.chooser.chosen(), 1);
  f.run(20000, time, 0.5);
  EXPECT_EQ(f.chooser.chosen(), 1);
  // A smaller team that is slower is not kept, however contended the larger one.
  Feed g(2);
  g.run(3000, [](int threads, int i) { return threads == 2 ? (i % 4 == 3 ? 5e-3 : 1e-3) : 2.4e-3; }, 0.5);
  EXPECT_EQ(g.chooser.chosen(), 2);
  EXPECT_GE(g.tries_started, 1);
}

TEST(TeamChooser, OneGlitchIsNoReasonToLeaveTheTeam) {
  Feed f(2);
  // A passing moment of another process: one pass stalled 40 ms, the team short of CPU in it.
  int glitches = 0;
  for (int i = 0; i < 3000; ++i) {
    const bool glitch = i % 500 == 250;
    glitches += glitch;
    f.run(1, [&](int threads, int) { return glitch ? 40e-3 : threads == 2 ? 1e-3 : 1.9e-3; }, glitch ? 0.1 : 1.0);
    EXPECT_EQ(f.chooser.chosen(), 2) << "pass " << i;
  }
  EXPECT_EQ(glitches, 6);
}

TEST(TeamChooser, AMoveDownIsCheckedSoonAndUndoneWhenTheContentionWasBrief) {
  Feed f(2);
  int pass = 0, moved_down_at = -1, back_at = -1;
  bool in_burst = false;
  for (; pass < 400; ++pass) {
    in_burst = pass >= 100 && pass < 130;  // 30 passes with another process on the cores
    f.run(1, [&](int threads, int) { return threads == 2 ? (in_burst ? 5e-3 : 1e-3) : 1.6e-3; }, in_burst ? 0.5 : 1.0);
    if (moved_down_at < 0 && f.chooser.chosen() == 1) moved_down_at = pass;
    if (moved_down_at >= 0 && back_at < 0 && f.chooser.chosen() == 2) back_at = pass;
  }
  EXPECT_GE(moved_down_at, 100);
  // Back within a few blocks of the burst's end (the budget alone would wait seconds of passes).
  EXPECT_GE(back_at, 130);
  EXPECT_LT(back_at, 250);
  EXPECT_EQ(f.chooser.chosen(), 2);
}

TEST(Contend, ParsesAutoAndCountsAndRefusesTheRest) {
  EXPECT_EQ(parse_contend("auto", 2), 1);
  EXPECT_EQ(parse_contend("auto", 16), 8);
  EXPECT_EQ(parse_contend("auto", 1), 1);
  EXPECT_EQ(parse_contend("0", 2), 0);
  EXPECT_EQ(parse_contend("8", 2), 8);
  for (const std::string bad : {"", "-1", "1.5", "two", "9", "1e3", "9999999"}) {
    try {
      parse_contend(bad, 2);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--contend"), std::string::npos) << e.what();
    }
  }
}

bool alive(pid_t pid) { return kill(pid, 0) == 0; }

// Whether `pid` is gone (or no longer this test's child) within `seconds`.
bool gone_within(pid_t pid, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    std::getline(stat, text);
    // Gone, or a zombie of a parent that died (reaped by init at once).
    if (!stat || text.find(") Z ") != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST(Contend, BusyProcessesRunUntilStoppedAndAreReapedOnAnException) {
  std::vector<pid_t> pids;
  {
    ContendingLoad load(2, 60);
    pids = load.pids();
    ASSERT_EQ(pids.size(), 2u);
    for (pid_t p : pids) EXPECT_TRUE(alive(p)) << p;
    load.stop();
    for (pid_t p : pids) EXPECT_FALSE(alive(p)) << p;  // killed and reaped: no zombie left
  }
  try {
    ContendingLoad load(1, 60);
    pids = load.pids();
    throw std::runtime_error("a case failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(alive(pids.at(0)));
}

const std::string kConvoy = CONVOY_BINARY;

fs::path tiny_suite(const fs::path& dir) {
  const fs::path suite = dir / "tiny.yaml";
  std::ofstream(suite) << "name: tiny\nmodels:\n  - {model: " << CONVOY_SOURCE_DIR
                       << "/models/lenet5.yaml, inference: [1], training: []}\ndevices: [cpu]\npeers: []\n";
  return suite;
}

TEST(ContendCli, TheBenchStopsItsLoadAtTheEndAndReportsIt) {
  convoy::testing::TempDir dir{"convoy-contend"};
  const auto r = convoy::testing::run_command(kConvoy + " bench --suite " + tiny_suite(dir.path()).string() +
                                              " --out " + (dir.path() / "out").string() +
                                              " --quick --no-chart --contend 2 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Under contention: 2 busy processes"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| lenet5 | inference | 1 |"), std::string::npos) << r.output;
  std::ifstream in(dir.path() / "out" / "results.json");
  const nlohmann::json results = nlohmann::json::parse(in);
  const auto pids = results.at("environment").at("contend").at("pids").get<std::vector<pid_t>>();
  ASSERT_EQ(pids.size(), 2u);
  for (pid_t p : pids) EXPECT_TRUE(gone_within(p, 0.1)) << p;
}

TEST(ContendCli, BadCountsAreRefusedBeforeAnythingRuns) {
  convoy::testing::TempDir dir{"convoy-contend"};
  const auto r = convoy::testing::run_command(kConvoy + " bench --suite " + tiny_suite(dir.path()).string() +
                                              " --out " + (dir.path() / "out").string() + " --contend lots 2>&1");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("--contend: expected 'auto'"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir.path() / "out" / "results.json"));
}

// kill -9 of the bench mid-run: its busy processes die with it (PR_SET_PDEATHSIG).
TEST(ContendCli, KillingTheBenchKillsItsLoad) {
  convoy::testing::TempDir dir{"convoy-contend"};
  const fs::path err = dir.path() / "stderr.txt";
  const auto started = convoy::testing::run_command(
      kConvoy + " bench --suite " + tiny_suite(dir.path()).string() + " --out " + (dir.path() / "out").string() +
      " --no-chart --contend 2 >/dev/null 2>" + err.string() + " & echo $!");
  const pid_t bench = static_cast<pid_t>(std::stol(started.output));
  std::vector<pid_t> pids;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (pids.empty() && std::chrono::steady_clock::now() < until) {
    std::ifstream in(err);
    for (std::string line; std::getline(in, line);)
      if (const size_t at = line.find(", pids "); at != std::string::npos) {
        std::istringstream list(line.substr(at + 7));
        for (pid_t p; list >> p;) pids.push_back(p);
      }
    if (pids.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(pids.size(), 2u) << "no pids line on the bench's stderr";
  ASSERT_EQ(kill(bench, SIGKILL), 0);
  for (pid_t p : pids) EXPECT_TRUE(gone_within(p, 5)) << p;
}

// doctor says how many threads CPU work takes and why, how they wait, and whether the inference
// team adapts, telling the user's variables from those convoy set itself.
TEST(ContendCli, DoctorSaysHowManyThreadsAndWhy) {
  const std::string clean = "env -u OMP_NUM_THREADS -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u CONVOY_OPENMP_SET ";
  auto r = convoy::testing::run_command(clean + kConvoy + " doctor 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("CPU threads, why: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("OpenMP wait: threads spin 30000 pauses between parallel regions in infer and bench, 3000 in "
                          "serve, none in train"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("CPU inference team: all "), std::string::npos) << r.output;
  r = convoy::testing::run_command(clean + "OMP_NUM_THREADS=1 GOMP_SPINCOUNT=77 CONVOY_ADAPTIVE_TEAM=0 " + kConvoy +
                                   " doctor 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("CPU threads, why: 1: OMP_NUM_THREADS=1 from the environment"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("OpenMP wait: from the environment: GOMP_SPINCOUNT=77"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("CPU inference team: all 1 threads always (CONVOY_ADAPTIVE_TEAM=0)"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace convoy
