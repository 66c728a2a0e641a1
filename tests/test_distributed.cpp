// Data-parallel plumbing on the CPU: the rank variables, the TCP rendezvous over loopback (its
// id exchange, its timeouts, its liveness channel), the local launcher with real child
// processes, and the gradient buckets' plan.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <thread>

#include "engine/core/error.h"
#include "engine/distributed/gradient_buckets.h"
#include "engine/distributed/launcher.h"
#include "engine/distributed/rendezvous.h"
#include "engine/distributed/world.h"
#include "tests/temp_dir.h"

using namespace convoy;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

TEST(DistributedWorld, NoVariablesIsAWorldOfOne) {
  const WorldInfo w = world_from_env(env_of({}));
  EXPECT_EQ(w.rank, 0);
  EXPECT_EQ(w.world_size, 1);
  EXPECT_FALSE(w.distributed());
}

TEST(DistributedWorld, TorchrunVariables) {
  const WorldInfo w = world_from_env(env_of(
      {{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "pod-0.svc"}, {"MASTER_PORT", "1234"}}));
  EXPECT_EQ(w.rank, 3);
  EXPECT_EQ(w.world_size, 4);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.master_addr, "pod-0.svc");
  EXPECT_EQ(w.master_port, 1234);
  EXPECT_TRUE(w.distributed());
}

TEST(DistributedWorld, OpenMpiVariables) {
  const WorldInfo w = world_from_env(env_of(
      {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}));
  EXPECT_EQ(w.rank, 1);
  EXPECT_EQ(w.world_size, 2);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.master_addr, "127.0.0.1");
  EXPECT_EQ(w.master_port, 29500);
  EXPECT_NE(w.source.find("OpenMPI"), std::string::npos);
  // torchrun's names win where both are there (a launcher run under mpirun sets its own).
  const WorldInfo both = world_from_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "3"}, {"OMPI_COMM_WORLD_RANK", "1"},
                                                {"OMPI_COMM_WORLD_SIZE", "2"}}));
  EXPECT_EQ(both.world_size, 3);
  EXPECT_EQ(both.rank, 0);
}

TEST(DistributedWorld, BadValuesNameTheVariable) {
  EXPECT_NE(error_of([] { world_from_env(env_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}})); }).find("RANK='2'"),
            std::string::npos);
  EXPECT_NE(error_of([] { world_from_env(env_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}})); }).find("RANK"),
            std::string::npos);
  EXPECT_NE(error_of([] { world_from_env(env_of({{"RANK", "0"}})); }).find("WORLD_SIZE is not set"),
            std::string::npos);
  EXPECT_NE(error_of([] { world_from_env(env_of({{"OMPI_COMM_WORLD_SIZE", "2"}})); }).find("OMPI_COMM_WORLD_RANK"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              world_from_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}));
            }).find("MASTER_PORT"),
            std::string::npos);
  EXPECT_NE(error_of([] { world_from_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "0"}})); }).find("WORLD_SIZE"),
            std::string::npos);
}

namespace {
WorldInfo loopback(int rank, int size, int port) {
  WorldInfo w;
  w.rank = rank;
  w.world_size = size;
  w.master_addr = "127.0.0.1";
  w.master_port = port;
  return w;
}
}  // namespace

TEST(Rendezvous, ThreeRanksGetRankZerosBytes) {
  const int port = free_port();
  std::string payload = "fake-nccl-id:";
  payload += std::string(115, 'x');
  std::string got1, got2;
  // The workers start first: they must retry until rank 0 listens.
  std::thread r1([&] { got1 = Rendezvous(loopback(1, 3, port), "", 10s).payload(); });
  std::thread r2([&] { got2 = Rendezvous(loopback(2, 3, port), "", 10s).payload(); });
  std::this_thread::sleep_for(300ms);
  Rendezvous r0(loopback(0, 3, port), payload, 10s);
  r1.join();
  r2.join();
  EXPECT_EQ(r0.payload(), payload);
  EXPECT_EQ(got1, payload);
  EXPECT_EQ(got2, payload);
}

TEST(Rendezvous, RankZeroTimesOutNamingTheMissingRanks) {
  const int port = free_port();
  std::thread r1([&] {
    try {
      Rendezvous(loopback(1, 3, port), "", 5s);
    } catch (const DeviceError&) {  // rank 0 gave up: no id for it either
    }
  });
  const auto start = Clock::now();
  try {
    Rendezvous(loopback(0, 3, port), "id", 1500ms);
    ADD_FAILURE() << "no timeout";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2 did not join"), std::string::npos) << e.what();
  }
  EXPECT_LT(seconds_since(start), 5.0);
  r1.join();
}

TEST(Rendezvous, AWorkerTimesOutWhenNoRankZeroListens) {
  const int port = free_port();
  const auto start = Clock::now();
  try {
    Rendezvous(loopback(1, 2, port), "", 700ms);
    ADD_FAILURE() << "no timeout";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("could not reach rank 0 at 127.0.0.1:" + std::to_string(port)),
              std::string::npos)
        << e.what();
  }
  EXPECT_GT(seconds_since(start), 0.6);
  EXPECT_LT(seconds_since(start), 4.0);
}

TEST(Rendezvous, ALostRankIsNamedAndAGoodbyeIsNot) {
  const int port = free_port();
  std::unique_ptr<Rendezvous> r1, r2;
  std::thread t1([&] { r1 = std::make_unique<Rendezvous>(loopback(1, 3, port), "", 10s); });
  std::thread t2([&] { r2 = std::make_unique<Rendezvous>(loopback(2, 3, port), "", 10s); });
  Rendezvous r0(loopback(0, 3, port), "id", 10s);
  t1.join();
  t2.join();
  std::atomic<int> lost0{-1}, lost1{-1};
  r0.monitor([&](int rank) { lost0 = rank; });
  r1->monitor([&](int rank) { lost1 = rank; });
  r2->goodbye();
  r2.reset();  // a clean end
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(lost0.load(), -1);
  EXPECT_EQ(lost1.load(), -1);
  // Rank 1 and rank 0's views of a rank that vanishes: rank 0 sees rank 1 go.
  r1.reset();
  const auto start = Clock::now();
  while (lost0.load() < 0 && seconds_since(start) < 5) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(lost0.load(), 1);
}

TEST(Rendezvous, WorkersHearWhichRankWasLost) {
  const int port = free_port();
  std::unique_ptr<Rendezvous> r1, r2;
  std::thread t1([&] { r1 = std::make_unique<Rendezvous>(loopback(1, 3, port), "", 10s); });
  std::thread t2([&] { r2 = std::make_unique<Rendezvous>(loopback(2, 3, port), "", 10s); });
  auto r0 = std::make_unique<Rendezvous>(loopback(0, 3, port), "id", 10s);
  t1.join();
  t2.join();
  std::atomic<int> lost0{-1}, lost1{-1};
  r0->monitor([&](int rank) { lost0 = rank; });
  r1->monitor([&](int rank) { lost1 = rank; });
  r2.reset();  // rank 2 dies: rank 0 sees it and tells rank 1
  const auto start = Clock::now();
  while ((lost0.load() < 0 || lost1.load() < 0) && seconds_since(start) < 5) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(lost0.load(), 2);
  EXPECT_EQ(lost1.load(), 2);
  // And rank 0's death reaches the workers as rank 0.
  std::atomic<int> lost_again{-1};
  std::unique_ptr<Rendezvous> a1;
  const int port2 = free_port();
  std::thread ta([&] { a1 = std::make_unique<Rendezvous>(loopback(1, 2, port2), "", 10s); });
  auto a0 = std::make_unique<Rendezvous>(loopback(0, 2, port2), "id", 10s);
  ta.join();
  a1->monitor([&](int rank) { lost_again = rank; });
  a0.reset();
  const auto start2 = Clock::now();
  while (lost_again.load() < 0 && seconds_since(start2) < 5) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(lost_again.load(), 0);
}

TEST(Launcher, RankEnvironmentSetsTheRankAndKeepsTheRest) {
  const std::vector<std::string> env = rank_environment(
      {"PATH=/bin", "NCCL_DEBUG=INFO", "RANK=9", "OMPI_COMM_WORLD_RANK=4", "MASTER_PORT=1"}, 1, 2, 4321);
  const std::set<std::string> got(env.begin(), env.end());
  for (const char* want : {"PATH=/bin", "NCCL_DEBUG=INFO", "RANK=1", "LOCAL_RANK=1", "WORLD_SIZE=2",
                           "MASTER_ADDR=127.0.0.1", "MASTER_PORT=4321"})
    EXPECT_TRUE(got.count(want)) << want;
  EXPECT_FALSE(got.count("RANK=9"));
  EXPECT_FALSE(got.count("MASTER_PORT=1"));
  EXPECT_FALSE(got.count("OMPI_COMM_WORLD_RANK=4"));
  EXPECT_EQ(env.size(), 2u + 6u);
}

TEST(Launcher, EveryRankRunsWithItsVariables) {
  convoy::testing::TempDir dir("convoy-launch");
  LaunchOptions o;
  o.program = "/bin/sh";
  o.args = {"-c", "echo \"$RANK $LOCAL_RANK $WORLD_SIZE $MASTER_ADDR $MASTER_PORT\" > " + dir.path().string() +
                      "/rank$RANK"};
  o.ranks = 3;
  o.master_port = 4567;
  std::ostringstream log;
  EXPECT_EQ(launch_local(o, log), 0) << log.str();
  for (int r = 0; r < 3; ++r) {
    std::ifstream f(dir.path() / ("rank" + std::to_string(r)));
    std::string line;
    std::getline(f, line);
    EXPECT_EQ(line, std::to_string(r) + " " + std::to_string(r) + " 3 127.0.0.1 4567");
  }
}

TEST(Launcher, ADeadRankStopsTheOthersAndIsNamed) {
  LaunchOptions o;
  o.program = "/bin/sh";
  // Rank 1 fails at once; the others would sleep for a minute unless stopped. `exec sleep`:
  // the SIGTERM reaches the sleep itself.
  o.args = {"-c", "if [ \"$RANK\" = 1 ]; then exit 7; fi; exec sleep 60"};
  o.ranks = 3;
  o.master_port = 4568;
  o.grace = 5s;
  std::ostringstream log;
  const auto start = Clock::now();
  EXPECT_EQ(launch_local(o, log), 7);
  EXPECT_LT(seconds_since(start), 10.0);
  EXPECT_NE(log.str().find("rank 1 (pid "), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("exited with status 7"), std::string::npos) << log.str();
}

TEST(Launcher, ARankThatIgnoresSigtermIsKilledAfterTheGrace) {
  LaunchOptions o;
  o.program = "/bin/sh";
  o.args = {"-c", "if [ \"$RANK\" = 0 ]; then sleep 0.2; kill -9 $$; fi; trap '' TERM; exec sleep 60"};
  o.ranks = 2;
  o.master_port = 4569;
  o.grace = 1s;
  std::ostringstream log;
  const auto start = Clock::now();
  EXPECT_EQ(launch_local(o, log), 128 + 9);
  EXPECT_LT(seconds_since(start), 8.0);
  EXPECT_NE(log.str().find("rank 0"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("killed by signal 9"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("killing them"), std::string::npos) << log.str();
}

TEST(GradientBuckets, PlanTilesTheGradientsInOrderWithinTheCap) {
  // Sizes in elements (4 bytes each); cap 1000 bytes = 250 elements; alignment 64 elements.
  const std::vector<int64_t> sizes = {10, 100, 200, 1000, 5, 64, 65, 300, 1};
  const int64_t cap = 1000, align = 64;
  const std::vector<GradBucket> buckets = plan_buckets(sizes, cap, align);
  std::vector<size_t> members;
  int64_t offset = 0;
  for (const GradBucket& b : buckets) {
    EXPECT_EQ(b.offset, offset);
    int64_t span = 0;
    for (size_t m : b.members) {
      members.push_back(m);
      span += (sizes[m] + align - 1) / align * align;
    }
    EXPECT_EQ(b.elements, span);
    EXPECT_EQ(b.elements % align, 0);
    // Closed once it reaches the cap: without its last member it was below it.
    const int64_t last = (sizes[b.members.back()] + align - 1) / align * align;
    EXPECT_LT((b.elements - last) * 4, cap);
    offset += b.elements;
  }
  std::vector<size_t> all(sizes.size());
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(members, all);  // every gradient once, in the order given
  // The boundaries for these sizes (padded 64, 128, 256 | 1024 | 64, 64, 128 | 320 | 64).
  ASSERT_EQ(buckets.size(), 5u);
  EXPECT_EQ(buckets[0].members, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(buckets[1].members, (std::vector<size_t>{3}));  // larger than the cap: alone
  EXPECT_EQ(buckets[2].members, (std::vector<size_t>{4, 5, 6}));
  EXPECT_EQ(buckets[3].members, (std::vector<size_t>{7}));
  EXPECT_EQ(buckets[4].members, (std::vector<size_t>{8}));
}

TEST(GradientBuckets, OneBucketWhenTheCapIsLarge) {
  const std::vector<GradBucket> b = plan_buckets({3, 4, 5}, int64_t{25} << 20, 64);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].elements, 3 * 64);
  EXPECT_TRUE(plan_buckets({}, 100, 64).empty());
}
