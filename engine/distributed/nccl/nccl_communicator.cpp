// NCCL between processes, one GPU each: the unique id through the rendezvous, a non-blocking
// communicator (every call returns at once, so no call can hang the process), collectives on a
// stream of their own ordered against the backend's stream by events, and a watchdog thread
// that aborts the communicator (ncclCommAbort) and ends the process, naming the rank, when a
// peer's process is gone, NCCL reports an error, or a collective passes the timeout.
// NCCL's own environment variables (NCCL_DEBUG, NCCL_SOCKET_IFNAME, NCCL_IB_*...) are NCCL's
// to read: nothing here sets them.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <iostream>
#include <mutex>
#include <thread>

#include "engine/backends/cuda/cuda_allocator.h"
#include "engine/core/error.h"
#include "engine/distributed/communicator.h"
#include "engine/distributed/rendezvous.h"
#include "kernels/cuda_runtime_check.h"

// Every NCCL call: an in-progress answer is waited for (within the timeout), an error throws
// DeviceError with the call text, NCCL's message and file:line. A member's macro: it needs the
// communicator.
#define CONVOY_NCCL_CHECK(call) check((call), #call, CONVOY_WHERE_)
// A call inside a group: it only queues (ncclGroupEnd's check waits for the group), so an
// in-progress answer is not waited for here.
#define CONVOY_NCCL_QUEUE(call) check_queued((call), #call, CONVOY_WHERE_)

namespace convoy {

// The exit status of a rank stopped by the watchdog (a peer failed or a collective timed out).
constexpr int kPeerFailureExit = 3;

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void throw_nccl_error(ncclResult_t st, ncclComm_t comm, const char* call, const char* where) {
  std::string last = comm ? ncclGetLastError(comm) : "";
  throw DeviceError(std::string("NCCL error ") + ncclGetErrorString(st) + (last.empty() ? "" : " (" + last + ")") +
                    " in " + call + " at " + where);
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::bf16: return ncclBfloat16;
    case DType::f16: return ncclFloat16;
    case DType::i32: return ncclInt32;
    case DType::u8: return ncclUint8;
  }
  throw InternalError("nccl_type: unknown dtype");
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Backend& backend, const WorldInfo& world, const CommunicatorOptions& options)
      : world_(world), timeout_(options.timeout) {
    auto* alloc = dynamic_cast<cuda::CudaAllocator*>(backend.allocator().get());
    if (!alloc) throw DeviceError("distributed training over NCCL needs a CUDA device, not " + backend.device().str());
    device_ = backend.device().index;
    allocator_ = backend.allocator();
    compute_ = static_cast<cudaStream_t>(alloc->stream());
    CONVOY_CUDA_CHECK(cudaSetDevice(device_));
    // The highest priority, as PyTorch gives its NCCL streams: a bucket's reduction should not
    // queue behind the backward kernels it is meant to overlap.
    int least = 0, greatest = 0;
    CONVOY_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CONVOY_CUDA_CHECK(cudaStreamCreateWithPriority(&comm_stream_, cudaStreamNonBlocking, greatest));
    CONVOY_CUDA_CHECK(cudaEventCreateWithFlags(&order_event_, cudaEventDisableTiming));
    ncclUniqueId id{};
    if (world.rank == 0) CONVOY_NCCL_CHECK(ncclGetUniqueId(&id));
    rendezvous_ = std::make_unique<Rendezvous>(world, std::string(id.internal, sizeof id.internal), timeout_);
    if (rendezvous_->payload().size() != sizeof id.internal)
      throw DeviceError("rendezvous: rank 0 sent " + std::to_string(rendezvous_->payload().size()) +
                        " bytes, not an NCCL unique id (another program on MASTER_PORT?)");
    std::memcpy(id.internal, rendezvous_->payload().data(), sizeof id.internal);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    CONVOY_NCCL_CHECK(ncclCommInitRankConfig(&comm_, world.world_size, id, world.rank, &config));
    int version = 0;
    ncclGetVersion(&version);
    describe_ = "NCCL " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
                std::to_string(version % 100) + ", " + std::to_string(world.world_size) + " ranks (" + world.source +
                ", rendezvous " + world.master_addr + ":" + std::to_string(world.master_port) + ")";
    rendezvous_->monitor([this](int lost) {
      fail("rank " + std::to_string(lost) + "'s process is gone (it crashed or was killed); see its own output");
    });
    watchdog_ = std::thread(&NcclCommunicator::watch, this);
  }

  ~NcclCommunicator() override {
    stop_ = true;
    if (watchdog_.joinable()) watchdog_.join();
    cudaSetDevice(device_);
    if (comm_) {
      // Abort, not finalize + destroy, even after a clean finish(): every collective is done by
      // then, and finalizing would wait for the peers, which may be gone already (a rank that
      // ends while rank 0 still writes its checkpoint). Abort frees without waiting on anyone.
      if (finished_) cudaStreamSynchronize(comm_stream_);
      ncclCommAbort(comm_);
    }
    for (auto& p : pending_) cudaEventDestroy(p.done);
    cudaEventDestroy(order_event_);
    cudaStreamDestroy(comm_stream_);
  }

  int rank() const override { return world_.rank; }
  int world_size() const override { return world_.world_size; }
  std::string describe() const override { return describe_; }

  void all_reduce(std::span<Tensor> tensors, ReduceOp op) override {
    launch("all_reduce", [&] {
      for (Tensor& t : tensors)
        CONVOY_NCCL_QUEUE(ncclAllReduce(t.raw(), t.raw(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()),
                                        op == ReduceOp::avg ? ncclAvg : ncclSum, comm_, comm_stream_));
    });
  }

  void broadcast(Tensor& tensor, int root) override {
    launch("broadcast", [&] {
      CONVOY_NCCL_QUEUE(ncclBroadcast(tensor.raw(), tensor.raw(), static_cast<size_t>(tensor.numel()),
                                      nccl_type(tensor.dtype()), root, comm_, comm_stream_));
    });
  }

  void wait() override {
    CONVOY_CUDA_CHECK(cudaSetDevice(device_));
    CONVOY_CUDA_CHECK(cudaEventRecord(order_event_, comm_stream_));
    CONVOY_CUDA_CHECK(cudaStreamWaitEvent(compute_, order_event_, 0));
  }

  void barrier() override {
    if (!barrier_flag_.defined()) barrier_flag_ = Tensor(Shape{1}, DType::f32, allocator_);
    Tensor one[] = {barrier_flag_};
    all_reduce(one, ReduceOp::sum);
    // The host waits here; the watchdog bounds the wait.
    CONVOY_CUDA_CHECK(cudaStreamSynchronize(comm_stream_));
  }

  void finish() override {
    // Every rank is here before any leaves: no rank's exit can pull buffers from under a peer's
    // last collective (the barrier's own is a few bytes, done once both have written them).
    barrier();
    finished_ = true;
    rendezvous_->goodbye();
  }

 private:
  struct Pending {
    cudaEvent_t done;
    Clock::time_point launched;
    std::string what;
  };

  // A call's status: in progress (a non-blocking communicator's answer) is waited for, within
  // the timeout; anything but success throws.
  void check(ncclResult_t st, const char* call, const char* where) {
    const auto deadline = Clock::now() + timeout_;
    while (st == ncclInProgress) {
      if (Clock::now() > deadline) fail(std::string(call) + timed_out());
      std::this_thread::yield();
      if (ncclCommGetAsyncError(comm_, &st) != ncclSuccess) break;
    }
    if (st != ncclSuccess) throw_nccl_error(st, comm_, call, where);
  }

  void check_queued(ncclResult_t st, const char* call, const char* where) {
    if (st != ncclSuccess && st != ncclInProgress) throw_nccl_error(st, comm_, call, where);
  }

  // One collective (a group of NCCL calls) on the communication stream, after the backend's
  // work so far, watched until it is done.
  template <class Calls>
  void launch(const char* what, Calls&& calls) {
    CONVOY_CUDA_CHECK(cudaSetDevice(device_));
    CONVOY_CUDA_CHECK(cudaEventRecord(order_event_, compute_));
    CONVOY_CUDA_CHECK(cudaStreamWaitEvent(comm_stream_, order_event_, 0));
    CONVOY_NCCL_QUEUE(ncclGroupStart());
    calls();
    CONVOY_NCCL_CHECK(ncclGroupEnd());
    cudaEvent_t done = nullptr;
    CONVOY_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    CONVOY_CUDA_CHECK(cudaEventRecord(done, comm_stream_));
    std::lock_guard lock(mutex_);
    pending_.push_back({done, Clock::now(), std::string(what) + " #" + std::to_string(++launched_)});
  }

  // The watchdog: collectives done are let go; the oldest one past the timeout, or an error
  // NCCL reports, ends the process.
  void watch() {
    cudaSetDevice(device_);
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress) {
        // A dead peer is often what NCCL reports: give the rendezvous monitor, which knows
        // which rank is gone, a moment to say so first.
        std::this_thread::sleep_for(std::chrono::seconds(1));
        fail(std::string("NCCL reports ") + ncclGetErrorString(async) + " (" + ncclGetLastError(comm_) +
             "): a peer rank failed or the network broke");
      }
      std::lock_guard lock(mutex_);
      while (!pending_.empty()) {
        const cudaError_t q = cudaEventQuery(pending_.front().done);
        if (q == cudaErrorNotReady) break;
        cudaEventDestroy(pending_.front().done);
        pending_.pop_front();
      }
      if (!pending_.empty() && Clock::now() - pending_.front().launched > timeout_)
        fail("collective " + pending_.front().what + timed_out());
    }
  }

  std::string timed_out() const {
    return " did not finish within " + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout_).count()) +
           " s (distributed.timeout_seconds): another rank hangs or died";
  }

  // Ends this process: one message, the communicator aborted (its kernels stop waiting on the
  // peers), exit status kPeerFailureExit. From whichever thread sees the failure first.
  [[noreturn]] void fail(const std::string& why) {
    std::call_once(failed_, [&] {
      std::cout.flush();
      std::cerr << "convoy: rank " << world_.rank << " of " << world_.world_size << ": " << why
                << "; aborting the NCCL communicator and stopping" << std::endl;
      if (comm_) ncclCommAbort(comm_);
      std::_Exit(kPeerFailureExit);
    });
    std::_Exit(kPeerFailureExit);  // another thread is already on its way out
  }

  WorldInfo world_;
  std::chrono::milliseconds timeout_;
  int device_ = 0;
  cudaStream_t compute_ = nullptr;      // the backend's (the allocator owns it)
  cudaStream_t comm_stream_ = nullptr;  // the collectives'
  cudaEvent_t order_event_ = nullptr;
  std::unique_ptr<Rendezvous> rendezvous_;
  ncclComm_t comm_ = nullptr;
  std::string describe_;
  std::thread watchdog_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::deque<Pending> pending_;  // launched, not yet seen done
  int64_t launched_ = 0;
  std::once_flag failed_;
  bool finished_ = false;
  std::shared_ptr<Allocator> allocator_;  // the backend's
  Tensor barrier_flag_;                    // (1) f32, what barrier() reduces
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Backend& backend, const WorldInfo& world,
                                                     const CommunicatorOptions& options) {
  return std::make_unique<NcclCommunicator>(backend, world, options);
}

}  // namespace convoy
