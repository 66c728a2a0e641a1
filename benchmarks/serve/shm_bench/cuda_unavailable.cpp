// convoy_shm_bench built without CUDA: --cuda says why it cannot.
#include <stdexcept>

#include "benchmarks/serve/shm_bench/shm_bench.h"

namespace convoy::shm_bench {

std::unique_ptr<ClientMemory> make_cuda_memory(int, size_t) {
  throw std::runtime_error("--cuda: this build has no CUDA (configure where nvcc and cuDNN are found)");
}

}  // namespace convoy::shm_bench
