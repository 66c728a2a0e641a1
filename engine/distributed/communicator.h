#pragma once
// Collectives across the ranks of a data-parallel job. Every rank calls the same collectives
// in the same order. On a device with streams (CUDA) a collective is stream-ordered: it reads
// its tensors after all work the backend queued before the call, runs on a stream of its own
// (so the backward pass goes on meanwhile), and work queued after wait() sees its result.
#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/core/tensor.h"
#include "engine/distributed/world.h"

namespace convoy {

enum class ReduceOp { sum, avg };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // One line for the run header: the transport and the world.
  virtual std::string describe() const = 0;

  // In place, every tensor (f32 or i32, contiguous, on the backend's device) reduced over the
  // ranks; the tensors are one bucket and go out together.
  virtual void all_reduce(std::span<Tensor> tensors, ReduceOp op) = 0;
  // `tensor` takes rank `root`'s values on every rank.
  virtual void broadcast(Tensor& tensor, int root) = 0;
  // Work queued on the backend from now on sees the results of every collective so far.
  virtual void wait() = 0;
  // Returns once every rank has called it.
  virtual void barrier() = 0;
  // Ends the job cleanly: the other ranks will not take this process's exit for a failure.
  virtual void finish() {}

  // Whether `flag` is true on any rank (blocking: a read-back). For decisions every rank must
  // take together: stop on a signal, skip a step.
  bool any(Backend& backend, bool flag);
  // `value` summed over the ranks (blocking, as any()), for counts every rank reports.
  int64_t sum(Backend& backend, int32_t value);
};

// The world of one process: every collective is the identity.
std::unique_ptr<Communicator> make_local_communicator();

// `size` ranks in this process, one per thread, over shared memory, on CPU tensors: the
// simulated world of the tests. Rank k's communicator is element k; each must be used from
// one thread, and every rank must call each collective.
std::vector<std::unique_ptr<Communicator>> make_thread_world(int size);

struct CommunicatorOptions {
  // A collective (or the set-up) not done within this time stops the process with a message:
  // a rank died or hangs. Also the rendezvous' limit.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
};

// NCCL between the processes of `world` (one GPU each: `backend`'s): the rendezvous on rank 0,
// a non-blocking NCCL communicator, and a watchdog that aborts it and ends the process naming
// the rank when a peer is gone or a collective passes the timeout. A DeviceError where NCCL is
// not compiled in or the backend is not CUDA.
std::unique_ptr<Communicator> make_nccl_communicator(Backend& backend, const WorldInfo& world,
                                                     const CommunicatorOptions& options);

// The communicator for this process's world: the local one for a world of one, else NCCL.
std::unique_ptr<Communicator> make_communicator(Backend& backend, const WorldInfo& world,
                                                const CommunicatorOptions& options);

}  // namespace convoy
