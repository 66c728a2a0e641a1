#pragma once
// NVML, the NVIDIA driver's management library (libnvidia-ml.so.1), opened at run time with dlopen:
// nothing links against it and no NVML header is needed to build, so a CPU-only host runs without
// it (and says why it has no GPU metrics), and a GPU host reads its GPUs through the driver it has.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace convoy::serve {

// The soname the driver installs (the unversioned libnvidia-ml.so is only in development packages).
inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";

// One reading of one GPU; a value NVML could not give (a GPU without power readings, say) is
// nullopt, and `errors` says why, one line per call that failed.
struct GpuReading {
  std::optional<double> utilization;               // [0, 1]: the fraction of the last sample period a kernel ran
  std::optional<uint64_t> memory_total, memory_used;  // bytes
  std::optional<double> power_watts, power_limit_watts;
  std::optional<uint64_t> energy_millijoules;      // since the driver loaded
  std::vector<std::string> errors;                 // "nvmlDeviceGetPowerUsage: Not Supported"
};

class Nvml {
 public:
  struct Device {
    void* handle = nullptr;  // nvmlDevice_t
    std::string uuid;        // "GPU-8b5e...": Triton's gpu_uuid label
    std::string name;        // "NVIDIA H200"
  };

  // Opens `library` and initializes NVML; where either fails, error() says why and the rest
  // returns nothing. Never throws for a missing library or driver.
  explicit Nvml(const std::string& library = kNvmlLibrary);
  ~Nvml();  // nvmlShutdown
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  bool usable() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  // The GPUs of `uuids` in that order (CUDA's visible devices), or every GPU NVML sees where
  // `uuids` is nullopt. A uuid NVML does not know, or a device it cannot name, is left out with a
  // line in `problems`.
  std::vector<Device> devices(const std::optional<std::vector<std::string>>& uuids,
                              std::vector<std::string>& problems) const;
  GpuReading read(const Device& device) const;

 private:
  struct Api;
  std::unique_ptr<Api> api_;
  bool initialized_ = false;
  std::string error_;
};

}  // namespace convoy::serve
