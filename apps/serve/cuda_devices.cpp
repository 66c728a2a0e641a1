// The CUDA runtime's view of the GPUs, for the GPU metrics: which ones this process sees (after
// CUDA_VISIBLE_DEVICES) and in which order, so that nv_gpu_* reports those and a model's cuda:N
// finds its GPU's gpu_uuid. Built with CUDA only (cuda_devices_unavailable.cpp otherwise).
#include <cuda_runtime_api.h>

#include <cstdio>

#include "apps/serve/device_metrics.h"

namespace convoy::serve {

std::optional<std::vector<std::string>> cuda_gpu_uuids() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {  // no driver, or one too old: NVML alone decides
    cudaGetLastError();
    return std::nullopt;
  }
  std::vector<std::string> uuids;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
      cudaGetLastError();
      return std::nullopt;
    }
    // NVML's spelling of the same 16 bytes.
    const auto* b = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
    char text[48];
    std::snprintf(text, sizeof text, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                  b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    uuids.emplace_back(text);
  }
  return uuids;
}

}  // namespace convoy::serve
