#pragma once
// Where this process sits in a data-parallel job: its rank, the world size, its GPU on this
// host and where rank 0's rendezvous listens. Read from the environment the launchers set:
// torchrun's names (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; `convoy train
// --gpus N` and the Kubernetes manifest set them), or OpenMPI's (OMPI_COMM_WORLD_RANK/SIZE/
// LOCAL_RANK, set by mpirun).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace convoy {

struct WorldInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;                     // the GPU of this host this rank uses
  std::string master_addr = "127.0.0.1";  // rank 0's host
  int master_port = 29500;                // torchrun's default
  std::string source = "single process";  // where the values came from, for messages
  bool distributed() const { return world_size > 1; }
};

// Looks an environment variable up; nullopt when unset. The real one reads getenv.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_env();

// The world from the environment: torchrun's variables first, then OpenMPI's, else a world of
// one. A value that is not a number, out of range (rank >= world size) or half-given (RANK
// without WORLD_SIZE) is an InputError naming the variable.
WorldInfo world_from_env(const EnvLookup& env);

}  // namespace convoy
