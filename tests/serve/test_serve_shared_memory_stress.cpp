// System shared memory of `convoy serve` under churn: regions unregistered and registered again
// while requests use them (each request answered 200 with the right outputs, or 400 saying the
// region is not registered; the server never falls over), and 10,000 register/unregister cycles
// that leave the server's resident memory, mappings and open descriptors where they were.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/serve/serve_fixture.h"
#include "tests/serve/shm_client.h"

namespace {

using json = nlohmann::json;
using convoy::testing::KeepAliveClient;
using convoy::testing::PosixShm;
using convoy::testing::ServerProcess;
using ServeSharedMemoryChurn = convoy::testing::ServeTest;

constexpr int64_t kN = 2;
constexpr size_t kInBytes = kN * 784, kOutOffset = 4096, kOutBytes = kN * 10 * sizeof(float);

std::string register_body(const PosixShm& object) {
  return json{{"key", object.key()}, {"offset", 0}, {"byte_size", object.size()}}.dump();
}

// UINT8 (kN, 1, 28, 28) from offset 0 of `region`, probabilities to kOutOffset.
std::string infer_body(const std::string& region) {
  const json p = {{"shared_memory_region", region}, {"shared_memory_byte_size", kInBytes}};
  const json out = {{"shared_memory_region", region}, {"shared_memory_offset", kOutOffset},
                    {"shared_memory_byte_size", kOutBytes}};
  return json{{"inputs", {{{"name", "input"}, {"datatype", "UINT8"}, {"shape", {kN, 1, 28, 28}}, {"parameters", p}}}},
              {"outputs", {{{"name", "probabilities"}, {"parameters", out}}}}}
      .dump();
}

TEST_F(ServeSharedMemoryChurn, UnregisteringWhileRequestsUseARegionNeverBreaksThem) {
  add_model("fm", 1, checkpoint_a_, "max_batch_size: 8\ndevice: cpu\n"
                                    "dynamic_batching: {max_queue_delay_microseconds: 200}\n");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  // One object per request thread (each its own outputs), all registered under one name in turn.
  constexpr int kThreads = 2;
  std::vector<std::unique_ptr<PosixShm>> objects;
  std::mt19937 rng(3);
  for (int t = 0; t < kThreads; ++t) {
    objects.push_back(std::make_unique<PosixShm>(8192));
    for (size_t i = 0; i < kInBytes; ++i) objects[t]->data()[i] = static_cast<char>(rng());
  }
  // What each object's pixels give, registered alone first.
  std::vector<std::string> want(kThreads);
  KeepAliveClient control(server.port());
  for (int t = 0; t < kThreads; ++t) {
    const std::string name = "r" + std::to_string(t);
    ASSERT_EQ(control.call("POST", "/v2/systemsharedmemory/region/" + name + "/register", register_body(*objects[t])).status,
              200);
    ASSERT_EQ(control.call("POST", "/v2/models/fm/infer", infer_body(name)).status, 200);
    want[t].assign(objects[t]->data() + kOutOffset, kOutBytes);
  }

  std::atomic<bool> done{false};
  std::atomic<int> ok{0}, refused{0};
  std::vector<std::string> wrong(kThreads);
  std::vector<std::thread> requests;
  for (int t = 0; t < kThreads; ++t)
    requests.emplace_back([&, t] {
      KeepAliveClient client(server.port());
      const std::string body = infer_body("r" + std::to_string(t));
      for (int i = 0; i < 400 && wrong[t].empty(); ++i) {
        std::memset(objects[t]->data() + kOutOffset, 0, kOutBytes);
        const auto r = client.call("POST", "/v2/models/fm/infer", body);
        if (r.status == 200 && std::string(objects[t]->data() + kOutOffset, kOutBytes) == want[t])
          ++ok;
        else if (r.status == 400 && r.body.find("is not registered") != std::string::npos)
          ++refused;
        else
          wrong[t] = std::to_string(r.status) + " " + r.body;
      }
    });
  std::thread churn([&] {
    KeepAliveClient client(server.port());
    for (int cycle = 0; !done; ++cycle) {
      const int t = cycle % kThreads;
      const std::string name = "r" + std::to_string(t);
      client.call("POST", "/v2/systemsharedmemory/region/" + name + "/unregister");
      std::this_thread::yield();
      client.call("POST", "/v2/systemsharedmemory/region/" + name + "/register", register_body(*objects[t]));
    }
  });
  for (std::thread& r : requests) r.join();
  done = true;
  churn.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], "") << "thread " << t;
  EXPECT_EQ(ok + refused, 400 * kThreads);
  EXPECT_GT(ok, 0);
  EXPECT_GT(refused, 0) << "the churn never caught a request: the test tested nothing";
  EXPECT_EQ(control.call("GET", "/v2/health/live").status, 200);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST_F(ServeSharedMemoryChurn, TenThousandRegisterUnregisterCyclesLeakNothing) {
  add_model("fm", 1, checkpoint_a_, "max_batch_size: 8\ndevice: cpu\n");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  PosixShm object(8192);
  KeepAliveClient client(server.port());
  const std::string reg = register_body(object), body = infer_body("leak");
  // Every 100th cycle a request maps the region's pages in, so unmapping has pages to give back.
  const auto cycles = [&](int n) {
    for (int i = 0; i < n; ++i) {
      if (client.call("POST", "/v2/systemsharedmemory/region/leak/register", reg).status != 200) return false;
      if (i % 100 == 0 && client.call("POST", "/v2/models/fm/infer", body).status != 200) return false;
      if (client.call("POST", "/v2/systemsharedmemory/region/leak/unregister").status != 200) return false;
    }
    return true;
  };
  ASSERT_TRUE(cycles(500));  // the allocator's arenas and the server's buffers at their working size
  const long rss_before = convoy::testing::resident_kb(server.pid());
  const long fds_before = convoy::testing::open_descriptors(server.pid());
  const long maps_before = convoy::testing::mappings(server.pid());
  ASSERT_GT(rss_before, 0);
  ASSERT_TRUE(cycles(10000));
  const long rss_after = convoy::testing::resident_kb(server.pid());
  EXPECT_EQ(convoy::testing::open_descriptors(server.pid()), fds_before);
  EXPECT_LT(convoy::testing::mappings(server.pid()) - maps_before, 16);  // 10,000 if each stayed mapped
  EXPECT_LT(rss_after - rss_before, 4096) << "VmRSS " << rss_before << " kB before, " << rss_after << " kB after";
  EXPECT_EQ(client.call("GET", "/v2/systemsharedmemory/status").body, "[]");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
