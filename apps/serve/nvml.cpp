// The few NVML types and functions convoy serve reads, declared here as nvml.h (the driver's
// development package) declares them: their ABI is stable across drivers, and the _v2 names are
// the ones the library exports for nvmlInit, nvmlDeviceGetCount and nvmlDeviceGetHandleByIndex.
#include "apps/serve/nvml.h"

#include <dlfcn.h>

#include <type_traits>

namespace convoy::serve {

namespace {

using nvmlReturn_t = int;  // an enum in nvml.h: NVML_SUCCESS is 0, every other value an error
constexpr nvmlReturn_t kNvmlSuccess = 0;
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlMemory_t {
  unsigned long long total, free, used;  // bytes
};
struct nvmlUtilization_t {
  unsigned int gpu, memory;  // percent of the last sample period
};
// NVML_DEVICE_UUID_V2_BUFFER_SIZE and NVML_DEVICE_NAME_V2_BUFFER_SIZE.
constexpr unsigned kUuidBuffer = 96, kNameBuffer = 96;

}  // namespace

struct Nvml::Api {
  void* library = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*device_count)(unsigned*) = nullptr;
  nvmlReturn_t (*handle_by_index)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*handle_by_uuid)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned*) = nullptr;        // milliwatts
  nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned*) = nullptr;  // milliwatts
  nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long*) = nullptr;  // millijoules

  // "nvmlDeviceGetPowerUsage: Not Supported (3)"
  std::string failed(const char* call, nvmlReturn_t r) const {
    const char* text = error_string != nullptr ? error_string(r) : nullptr;
    return std::string(call) + ": " + (text != nullptr ? text : "unknown error") + " (" + std::to_string(r) + ")";
  }
};

Nvml::Nvml(const std::string& library) : api_(std::make_unique<Api>()) {
  Api& a = *api_;
  a.library = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (a.library == nullptr) {
    const char* why = dlerror();
    error_ = library + " cannot be loaded (" + (why != nullptr ? why : "no reason given") +
             "): no NVIDIA driver on this host, or, in a container, one started without the GPU runtime";
    return;
  }
  auto find = [&](auto& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(a.library, symbol));
    if (fn == nullptr && error_.empty()) error_ = library + " has no " + symbol + " (a driver too old for it?)";
  };
  find(a.init, "nvmlInit_v2");
  find(a.shutdown, "nvmlShutdown");
  find(a.error_string, "nvmlErrorString");
  find(a.device_count, "nvmlDeviceGetCount_v2");
  find(a.handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
  find(a.handle_by_uuid, "nvmlDeviceGetHandleByUUID");
  find(a.uuid, "nvmlDeviceGetUUID");
  find(a.name, "nvmlDeviceGetName");
  find(a.utilization, "nvmlDeviceGetUtilizationRates");
  find(a.memory, "nvmlDeviceGetMemoryInfo");
  find(a.power, "nvmlDeviceGetPowerUsage");
  find(a.power_limit, "nvmlDeviceGetPowerManagementLimit");
  find(a.energy, "nvmlDeviceGetTotalEnergyConsumption");
  if (!error_.empty()) return;
  if (const nvmlReturn_t r = a.init(); r != kNvmlSuccess) {
    error_ = a.failed("nvmlInit", r);
    return;
  }
  initialized_ = true;
}

Nvml::~Nvml() {
  if (initialized_) api_->shutdown();
  // The library stays open: a driver's library may keep state past nvmlShutdown, and dlopen
  // counts references, so a second Nvml shares it.
}

std::vector<Nvml::Device> Nvml::devices(const std::optional<std::vector<std::string>>& uuids,
                                        std::vector<std::string>& problems) const {
  std::vector<Device> out;
  if (!usable()) return out;
  const Api& a = *api_;
  auto named = [&](nvmlDevice_t handle, const std::string& what) -> bool {
    Device d;
    d.handle = handle;
    char text[kUuidBuffer] = {};
    if (const nvmlReturn_t r = a.uuid(handle, text, kUuidBuffer); r != kNvmlSuccess) {
      problems.push_back(what + ": " + a.failed("nvmlDeviceGetUUID", r));
      return false;
    }
    d.uuid = text;
    char name[kNameBuffer] = {};
    if (a.name(handle, name, kNameBuffer) == kNvmlSuccess) d.name = name;
    out.push_back(std::move(d));
    return true;
  };
  if (uuids) {
    for (const std::string& uuid : *uuids) {
      nvmlDevice_t handle = nullptr;
      if (const nvmlReturn_t r = a.handle_by_uuid(uuid.c_str(), &handle); r != kNvmlSuccess)
        problems.push_back("GPU " + uuid + ": " + a.failed("nvmlDeviceGetHandleByUUID", r));
      else
        named(handle, "GPU " + uuid);
    }
    return out;
  }
  unsigned count = 0;
  if (const nvmlReturn_t r = a.device_count(&count); r != kNvmlSuccess) {
    problems.push_back(a.failed("nvmlDeviceGetCount", r));
    return out;
  }
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t handle = nullptr;
    if (const nvmlReturn_t r = a.handle_by_index(i, &handle); r != kNvmlSuccess)
      problems.push_back("NVML device " + std::to_string(i) + ": " + a.failed("nvmlDeviceGetHandleByIndex", r));
    else
      named(handle, "NVML device " + std::to_string(i));
  }
  return out;
}

GpuReading Nvml::read(const Device& device) const {
  GpuReading g;
  if (!usable()) return g;
  const Api& a = *api_;
  const auto handle = static_cast<nvmlDevice_t>(device.handle);
  auto call = [&](const char* what, nvmlReturn_t r) {
    if (r != kNvmlSuccess) g.errors.push_back(a.failed(what, r));
    return r == kNvmlSuccess;
  };
  nvmlUtilization_t u{};
  if (call("nvmlDeviceGetUtilizationRates", a.utilization(handle, &u))) g.utilization = u.gpu / 100.0;
  nvmlMemory_t m{};
  if (call("nvmlDeviceGetMemoryInfo", a.memory(handle, &m))) {
    g.memory_total = m.total;
    g.memory_used = m.used;
  }
  unsigned milliwatts = 0;
  if (call("nvmlDeviceGetPowerUsage", a.power(handle, &milliwatts))) g.power_watts = milliwatts / 1000.0;
  if (call("nvmlDeviceGetPowerManagementLimit", a.power_limit(handle, &milliwatts)))
    g.power_limit_watts = milliwatts / 1000.0;
  unsigned long long millijoules = 0;
  if (call("nvmlDeviceGetTotalEnergyConsumption", a.energy(handle, &millijoules))) g.energy_millijoules = millijoules;
  return g;
}

}  // namespace convoy::serve
