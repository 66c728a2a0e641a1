#include "engine/train/data_parallel.h"

#include <sstream>

#include "engine/core/error.h"

namespace convoy {

RunConfig config_for_rank(const RunConfig& config, const WorldInfo& world) {
  RunConfig c = config;
  if (!world.distributed()) return c;
  if (c.device == "auto" || c.device == "cuda") {
    c.device = "cuda:" + std::to_string(world.local_rank);
  } else if (c.device.starts_with("cuda:")) {
    throw InputError(config.source + ": device '" + config.device + "' names one GPU, but this is rank " +
                     std::to_string(world.rank) + " of " + std::to_string(world.world_size) +
                     ": use device: cuda (each rank takes cuda:LOCAL_RANK)");
  }
  return c;
}

CommunicatorOptions communicator_options(const RunConfig& config) {
  CommunicatorOptions o;
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(config.distributed_timeout_seconds * 1000));
  return o;
}

std::string data_parallel_line(const RunConfig& config, const Communicator& comm) {
  std::ostringstream out;
  out << "data parallel: " << comm.describe() << "; batch " << config.batch_size << " per rank, effective batch "
      << config.batch_size * comm.world_size() << ", lr " << config.optimizer.lr
      << " (as configured: scale it with the effective batch yourself), batch norm "
      << (config.sync_batchnorm ? "synchronized over the ranks" : "per GPU") << ", gradient buckets of "
      << config.bucket_mb << " MB, collective timeout " << config.distributed_timeout_seconds << " s";
  return out.str();
}

int64_t resume_batch(int64_t saved_batches, int64_t saved_global_batch, int64_t global_batch) {
  if (saved_global_batch <= 0 || saved_global_batch == global_batch) return saved_batches;
  return saved_batches * saved_global_batch / global_batch;
}

void share_from_rank0(Communicator& comm, Backend& backend, std::vector<int64_t*> values) {
  // i32 halves of 31 bits: what every backend and NCCL reduce and broadcast alike.
  std::vector<int32_t> halves;
  for (const int64_t* v : values) {
    CONVOY_CHECK(*v >= 0 && *v < (int64_t{1} << 62), "a counter out of range");
    halves.push_back(static_cast<int32_t>(*v >> 31));
    halves.push_back(static_cast<int32_t>(*v & 0x7fffffff));
  }
  Tensor t = backend.upload(Tensor::from_ints(halves, {static_cast<int64_t>(halves.size())}));  // (2 x values) i32
  if (t.device().is_cpu()) t = t.clone();
  comm.broadcast(t, 0);
  comm.wait();
  const Tensor host = t.to_cpu();
  for (size_t i = 0; i < values.size(); ++i)
    *values[i] = (static_cast<int64_t>(host.data<int32_t>()[2 * i]) << 31) | host.data<int32_t>()[2 * i + 1];
}

}  // namespace convoy
