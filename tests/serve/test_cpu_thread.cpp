// The CPU thread of `convoy serve` (apps/serve/cpu_thread.h): the CPU work of every caller runs
// on one thread, one piece at a time; what a piece throws reaches its caller; a piece that
// queues more work runs it at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "apps/serve/cpu_thread.h"
#include "engine/core/error.h"

namespace {

using convoy::serve::run_on_cpu_thread;

TEST(CpuThread, RunsEveryCallersWorkOnOneThreadOnePieceAtATime) {
  std::mutex mutex;
  std::set<std::thread::id> ran_on;
  std::atomic<int> inside{0}, most_inside{0}, pieces{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int i = 0; i < 50; ++i)
        run_on_cpu_thread([&] {
          const int now = ++inside;
          most_inside = std::max(most_inside.load(), now);
          {
            std::lock_guard lock(mutex);
            ran_on.insert(std::this_thread::get_id());
          }
          std::this_thread::yield();
          --inside;
          ++pieces;
        });
    });
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(pieces.load(), 200);  // each call returned after its piece ran
  EXPECT_EQ(most_inside.load(), 1);
  ASSERT_EQ(ran_on.size(), 1u);
  for (const std::thread& t : callers) EXPECT_NE(*ran_on.begin(), t.get_id());
  EXPECT_NE(*ran_on.begin(), std::this_thread::get_id());
}

TEST(CpuThread, PassesWhatAPieceThrowsToItsCallerAndGoesOn) {
  EXPECT_THROW(run_on_cpu_thread([] { throw convoy::InputError("bad batch"); }), convoy::InputError);
  bool ran = false;
  run_on_cpu_thread([&] { ran = true; });
  EXPECT_TRUE(ran);
}

TEST(CpuThread, APieceThatQueuesMoreWorkRunsItAtOnce) {
  std::thread::id outer, inner;
  run_on_cpu_thread([&] {
    outer = std::this_thread::get_id();
    run_on_cpu_thread([&] { inner = std::this_thread::get_id(); });
  });
  EXPECT_EQ(outer, inner);
}

}  // namespace
