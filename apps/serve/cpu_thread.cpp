#include "apps/serve/cpu_thread.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

namespace convoy::serve {

namespace {

class CpuThread {
 public:
  CpuThread() : thread_([this] { loop(); }) {}
  ~CpuThread() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }

  void run(const std::function<void()>& work) {
    if (std::this_thread::get_id() == thread_.get_id()) return work();
    std::packaged_task<void()> task(work);
    std::future<void> done = task.get_future();
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(&task);
    }
    wake_.notify_one();
    // A short piece (LeNet-5 at batch 1: 50 us) is done before this thread would have gone to
    // sleep and been woken again, which costs hundreds of microseconds where the CPU it sleeps on
    // idles (a VM's vCPU halts): look for the result for a while first, yielding the CPU.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
    while (done.wait_for(std::chrono::seconds(0)) != std::future_status::ready &&
           std::chrono::steady_clock::now() < give_up)
      std::this_thread::yield();
    done.get();
  }

 private:
  void loop() {
    for (;;) {
      std::packaged_task<void()>* task = nullptr;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = queue_.front();
        queue_.pop_front();
      }
      (*task)();  // a packaged_task keeps what the work throws for its future
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<void()>*> queue_;  // each owned by the run() waiting for it
  bool stopping_ = false;
  std::thread thread_;  // last: it starts once the members above exist
};

}  // namespace

void run_on_cpu_thread(const std::function<void()>& work) {
  static CpuThread cpu;
  cpu.run(work);
}

}  // namespace convoy::serve
