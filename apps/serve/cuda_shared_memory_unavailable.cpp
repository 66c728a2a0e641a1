// CUDA shared memory in a build without CUDA: registering a region says why it cannot be.
#include "apps/serve/shared_memory.h"

namespace convoy::serve {

std::shared_ptr<const SharedMemoryRegion> open_cuda_region(std::string_view, int64_t, uint64_t) {
  throw RequestError(400, cuda_shared_memory_unavailable_reason());
}

}  // namespace convoy::serve
