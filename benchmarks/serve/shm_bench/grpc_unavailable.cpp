// convoy_shm_bench built without gRPC: --grpc says why it cannot.
#include <stdexcept>

#include "benchmarks/serve/shm_bench/shm_bench.h"

namespace convoy::shm_bench {

std::unique_ptr<Connection> connect_grpc(int) {
  throw std::runtime_error("--grpc: this build has no gRPC (configure with libgrpc++-dev)");
}

}  // namespace convoy::shm_bench
