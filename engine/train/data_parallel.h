#pragma once
// The training loop's data-parallel pieces: which GPU a rank takes, the run header's line, and
// where a resume on another number of GPUs picks an epoch up.
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "engine/config/run_config.h"
#include "engine/distributed/communicator.h"
#include "engine/distributed/world.h"

namespace convoy {

// The config as rank `world.rank` runs it: device auto or cuda becomes cuda:LOCAL_RANK (one GPU
// per process, as torchrun's LOCAL_RANK means); one named GPU for several ranks is an InputError.
RunConfig config_for_rank(const RunConfig& config, const WorldInfo& world);
CommunicatorOptions communicator_options(const RunConfig& config);
// "data parallel: 2 ranks over NCCL ..., batch 128 per rank, effective batch 256, lr 0.1 ..."
std::string data_parallel_line(const RunConfig& config, const Communicator& comm);
// The batches of an epoch done, in batches of `global_batch` samples, for a checkpoint that
// had done `saved_batches` batches of `saved_global_batch` (0: the same): whole batches only,
// so a resume on another number of GPUs may see up to one batch of that epoch again.
int64_t resume_batch(int64_t saved_batches, int64_t saved_global_batch, int64_t global_batch);

// Every rank takes rank 0's values of these counters (each in 0 ... 2^62).
void share_from_rank0(Communicator& comm, Backend& backend, std::vector<int64_t*> values);

// A stream that writes nowhere: the log of every rank but 0.
class NullStream : public std::ostream {
 public:
  NullStream() : std::ostream(nullptr) {}
};

}  // namespace convoy
