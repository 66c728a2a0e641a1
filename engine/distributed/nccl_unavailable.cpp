// A build without CUDA has no NCCL: a distributed run says so instead of failing to link.
#include "engine/core/error.h"
#include "engine/distributed/communicator.h"

namespace convoy {

std::unique_ptr<Communicator> make_nccl_communicator(Backend&, const WorldInfo& world, const CommunicatorOptions&) {
  throw DeviceError("rank " + std::to_string(world.rank) + " of " + std::to_string(world.world_size) +
                    ": distributed training needs NCCL, and this convoy was built without CUDA (CONVOY_CUDA=OFF)");
}

}  // namespace convoy
