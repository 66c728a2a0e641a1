// The GPU metrics in a build without CUDA: no CUDA device order to follow, so every GPU that NVML
// sees is reported.
#include "apps/serve/device_metrics.h"

namespace convoy::serve {

std::optional<std::vector<std::string>> cuda_gpu_uuids() { return std::nullopt; }

}  // namespace convoy::serve
