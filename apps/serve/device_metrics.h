#pragma once
// The GPUs' and the host's state in Triton's metric names: nv_gpu_utilization,
// nv_gpu_memory_total_bytes, nv_gpu_memory_used_bytes, nv_gpu_power_usage, nv_gpu_power_limit and
// nv_energy_consumption per GPU (label gpu_uuid, read through NVML), and nv_cpu_utilization,
// nv_cpu_memory_total_bytes and nv_cpu_memory_used_bytes (from /proc). A thread of its own samples
// them every interval (Triton's --metrics-interval-ms); GET /metrics writes the last sample, so
// neither a scrape nor a request ever waits on the driver.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "apps/serve/host_metrics.h"
#include "apps/serve/nvml.h"

namespace convoy::serve {

struct DeviceMetricsOptions {
  bool gpu = true;  // --allow-gpu-metrics
  bool cpu = true;  // --allow-cpu-metrics
  // --metrics-interval-ms; 0: no sampling thread, the owner calls sample() (the tests).
  std::chrono::milliseconds interval{2000};
  std::string nvml_library = kNvmlLibrary;
  // The GPUs to report, by CUDA index (cuda_gpu_uuids()); nullopt: every GPU NVML sees.
  std::optional<std::vector<std::string>> gpu_uuids;
};

// The UUIDs of the GPUs the CUDA runtime sees, in its order (cuda:0 first; CUDA_VISIBLE_DEVICES
// applies), as NVML writes them ("GPU-" and 32 hex digits in 8-4-4-4-12 groups). nullopt where
// this build has no CUDA or the runtime cannot tell (no driver): every GPU NVML sees is reported.
std::optional<std::vector<std::string>> cuda_gpu_uuids();

// One value per GPU, by its uuid.
struct GpuSample {
  std::string uuid;
  GpuReading reading;
  std::optional<double> energy_joules;  // since the server started (Triton's nv_energy_consumption)
};

struct HostSample {
  std::optional<double> cpu_utilization;  // over the last interval; 0 before the first one ends
  std::optional<HostMemory> memory;
};

class DeviceMetrics {
 public:
  // Opens NVML (where options.gpu) and takes the first sample; starts the sampling thread. What it
  // cannot read is said once on `log` (a host without NVIDIA's driver: one line), never thrown.
  DeviceMetrics(DeviceMetricsOptions options, std::ostream& log);
  ~DeviceMetrics();  // stops the thread
  DeviceMetrics(const DeviceMetrics&) = delete;
  DeviceMetrics& operator=(const DeviceMetrics&) = delete;

  // Reads every device now and keeps it as the last sample (the thread's work, every interval).
  void sample();
  // The last sample in Prometheus's text format (# HELP, # TYPE and the series of each family).
  void write_prometheus(std::ostream& out) const;
  // The uuid of CUDA device `index` (a model's cuda:N); empty where unknown.
  std::string gpu_uuid(int index) const;
  // The GPUs reported, by uuid (none where NVML is absent or GPU metrics are off).
  std::vector<std::string> gpus() const;

 private:
  void run();
  void say_once(const std::string& line);  // a line on the log, the first time it comes

  const DeviceMetricsOptions options_;
  std::ostream& log_;
  std::optional<Nvml> nvml_;
  std::vector<Nvml::Device> devices_;
  // The sampling's own state, under sampling_: by device, the driver's last energy reading and
  // the joules counted since the start; the last /proc/stat reading; what say_once said.
  std::mutex sampling_;
  std::vector<std::optional<uint64_t>> last_energy_mj_;
  std::vector<double> energy_joules_;
  std::optional<CpuTimes> last_cpu_;
  std::set<std::string> said_;

  mutable std::mutex mutex_;  // the last sample, and the thread's stop
  std::vector<GpuSample> gpu_sample_;
  HostSample host_sample_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the rest is made
};

}  // namespace convoy::serve
