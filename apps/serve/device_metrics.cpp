#include "apps/serve/device_metrics.h"

#include "apps/serve/prometheus_text.h"

namespace convoy::serve {

DeviceMetrics::DeviceMetrics(DeviceMetricsOptions options, std::ostream& log)
    : options_(std::move(options)), log_(log) {
  if (options_.gpu) {
    nvml_.emplace(options_.nvml_library);
    if (!nvml_->usable()) {
      say_once("convoy serve: no GPU metrics: " + nvml_->error());
    } else {
      std::vector<std::string> problems;
      devices_ = nvml_->devices(options_.gpu_uuids, problems);
      for (const std::string& p : problems) say_once("convoy serve: no GPU metrics for " + p);
      std::string listed;
      for (const Nvml::Device& d : devices_) listed += (listed.empty() ? "" : ", ") + d.uuid + " (" + d.name + ")";
      say_once(devices_.empty() ? "convoy serve: no GPU metrics: NVML reports no GPU this process can use"
                                : "convoy serve: GPU metrics for " + listed);
      last_energy_mj_.resize(devices_.size());
      energy_joules_.resize(devices_.size());
    }
  }
  sample();
  const bool anything = !devices_.empty() || options_.cpu;
  if (options_.interval.count() > 0 && anything) thread_ = std::thread([this] { run(); });
}

DeviceMetrics::~DeviceMetrics() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DeviceMetrics::run() {
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, options_.interval, [this] { return stop_; })) {
    lock.unlock();
    sample();
    lock.lock();
  }
}

void DeviceMetrics::say_once(const std::string& line) {
  if (said_.insert(line).second) log_ << line << std::endl;
}

void DeviceMetrics::sample() {
  std::lock_guard sampling(sampling_);
  std::vector<GpuSample> gpus;
  for (size_t i = 0; i < devices_.size(); ++i) {
    GpuSample s;
    s.uuid = devices_[i].uuid;
    s.reading = nvml_->read(devices_[i]);
    for (const std::string& e : s.reading.errors) say_once("convoy serve: GPU " + s.uuid + ": " + e);
    // Triton's nv_energy_consumption counts from the server's start: the first reading adds
    // nothing, each later one what the driver counted since the one before. Where the driver's
    // counter starts over (a driver reload) that interval adds nothing, and the count goes on.
    if (const std::optional<uint64_t> now = s.reading.energy_millijoules) {
      std::optional<uint64_t>& last = last_energy_mj_[i];
      if (last && *now >= *last) energy_joules_[i] += static_cast<double>(*now - *last) / 1000.0;
      last = now;
      s.energy_joules = energy_joules_[i];
    }
    gpus.push_back(std::move(s));
  }
  HostSample host;
  if (options_.cpu) {
    if (const std::optional<CpuTimes> now = parse_proc_stat(read_proc_file("/proc/stat"))) {
      host.cpu_utilization = last_cpu_ ? cpu_utilization(*last_cpu_, *now) : 0.0;
      last_cpu_ = now;
    } else {
      say_once("convoy serve: no CPU utilization: /proc/stat has no readable \"cpu\" line");
    }
    host.memory = parse_meminfo(read_proc_file("/proc/meminfo"));
    if (!host.memory) say_once("convoy serve: no CPU memory metrics: /proc/meminfo has no readable MemTotal and MemAvailable");
  }
  std::lock_guard lock(mutex_);
  gpu_sample_ = std::move(gpus);
  host_sample_ = host;
}

void DeviceMetrics::write_prometheus(std::ostream& out) const {
  std::vector<GpuSample> gpus;
  HostSample host;
  {
    std::lock_guard lock(mutex_);
    gpus = gpu_sample_;
    host = host_sample_;
  }
  struct GpuFamily {
    const char* name;
    const char* type;
    const char* help;  // Triton's
    std::optional<double> (*value)(const GpuSample&);
  };
  static const GpuFamily kGpu[] = {
      {"nv_gpu_utilization", "gauge", "GPU utilization rate [0.0 - 1.0)",
       [](const GpuSample& s) { return s.reading.utilization; }},
      {"nv_gpu_memory_total_bytes", "gauge", "GPU total memory, in bytes",
       [](const GpuSample& s) -> std::optional<double> {
         if (!s.reading.memory_total) return std::nullopt;
         return static_cast<double>(*s.reading.memory_total);
       }},
      {"nv_gpu_memory_used_bytes", "gauge", "GPU used memory, in bytes",
       [](const GpuSample& s) -> std::optional<double> {
         if (!s.reading.memory_used) return std::nullopt;
         return static_cast<double>(*s.reading.memory_used);
       }},
      {"nv_gpu_power_usage", "gauge", "GPU power usage in watts", [](const GpuSample& s) { return s.reading.power_watts; }},
      {"nv_gpu_power_limit", "gauge", "GPU power management limit in watts",
       [](const GpuSample& s) { return s.reading.power_limit_watts; }},
      {"nv_energy_consumption", "counter", "GPU energy consumption in joules since convoy serve started",
       [](const GpuSample& s) { return s.energy_joules; }},
  };
  for (const GpuFamily& f : kGpu) {
    bool any = false;
    for (const GpuSample& s : gpus) {
      const std::optional<double> v = f.value(s);
      if (!v) continue;  // not supported on this GPU: no series rather than a false 0
      if (!any) prometheus_header(out, f.name, f.type, f.help);
      any = true;
      out << f.name << "{gpu_uuid=\"" << prometheus_label(s.uuid) << "\"} " << prometheus_number(*v) << '\n';
    }
  }
  if (host.cpu_utilization) {
    prometheus_header(out, "nv_cpu_utilization", "gauge", "CPU utilization rate [0.0 - 1.0]");
    out << "nv_cpu_utilization " << prometheus_number(*host.cpu_utilization) << '\n';
  }
  if (host.memory) {
    prometheus_header(out, "nv_cpu_memory_total_bytes", "gauge", "CPU total memory (RAM), in bytes");
    out << "nv_cpu_memory_total_bytes " << host.memory->total << '\n';
    prometheus_header(out, "nv_cpu_memory_used_bytes", "gauge", "CPU used memory (RAM), in bytes");
    out << "nv_cpu_memory_used_bytes " << host.memory->used << '\n';
  }
}

std::string DeviceMetrics::gpu_uuid(int index) const {
  if (!options_.gpu_uuids || index < 0 || static_cast<size_t>(index) >= options_.gpu_uuids->size()) return "";
  return (*options_.gpu_uuids)[static_cast<size_t>(index)];
}

std::vector<std::string> DeviceMetrics::gpus() const {
  std::vector<std::string> out;
  for (const Nvml::Device& d : devices_) out.push_back(d.uuid);
  return out;
}

}  // namespace convoy::serve
