// A stand-in for the driver's libnvidia-ml.so.1 with NVML's C ABI, for testing the GPU metrics
// (apps/serve/nvml.cpp, device_metrics.cpp) on a host without a GPU: two GPUs with known values,
// the second without power or energy readings (NVML_ERROR_NOT_SUPPORTED, as on many boards).
// CONVOY_FAKE_NVML_INIT=fail makes nvmlInit fail as a host whose driver is not loaded does.
#include <cstdlib>
#include <cstring>

struct nvmlDevice_st {
  const char* uuid;
  const char* name;
  unsigned utilization;  // percent
  bool power;            // power and energy readings supported
};

namespace {

constexpr int kSuccess = 0, kInvalidArgument = 2, kNotSupported = 3, kNotFound = 6, kInsufficientSize = 7,
              kDriverNotLoaded = 9, kUninitialized = 1;

nvmlDevice_st devices[] = {
    {"GPU-00000000-1111-2222-3333-444444444444", "Fake GPU 0", 37, true},
    {"GPU-55555555-6666-7777-8888-999999999999", "Fake GPU 1", 100, false},
};
int initialized = 0;
unsigned long long energy_mj = 1000000;  // goes up 2500 mJ a reading

int copy(const char* text, char* out, unsigned length) {
  if (std::strlen(text) + 1 > length) return kInsufficientSize;
  std::strcpy(out, text);
  return kSuccess;
}

}  // namespace

extern "C" {

struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlUtilization_t {
  unsigned gpu, memory;
};

int nvmlInit_v2() {
  const char* mode = std::getenv("CONVOY_FAKE_NVML_INIT");
  if (mode != nullptr && std::strcmp(mode, "fail") == 0) return kDriverNotLoaded;
  ++initialized;
  return kSuccess;
}

int nvmlShutdown() {
  if (initialized == 0) return kUninitialized;
  --initialized;
  return kSuccess;
}

const char* nvmlErrorString(int result) {
  switch (result) {
    case kSuccess: return "Success";
    case kInvalidArgument: return "Invalid Argument";
    case kNotSupported: return "Not Supported";
    case kNotFound: return "Not Found";
    case kDriverNotLoaded: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}

int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = 2;
  return initialized > 0 ? kSuccess : kUninitialized;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_st** device) {
  if (index >= 2) return kInvalidArgument;
  *device = &devices[index];
  return kSuccess;
}

int nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_st** device) {
  for (nvmlDevice_st& d : devices)
    if (std::strcmp(d.uuid, uuid) == 0) {
      *device = &d;
      return kSuccess;
    }
  return kNotFound;
}

int nvmlDeviceGetUUID(nvmlDevice_st* device, char* uuid, unsigned length) { return copy(device->uuid, uuid, length); }
int nvmlDeviceGetName(nvmlDevice_st* device, char* name, unsigned length) { return copy(device->name, name, length); }

int nvmlDeviceGetUtilizationRates(nvmlDevice_st* device, nvmlUtilization_t* u) {
  u->gpu = device->utilization;
  u->memory = device->utilization / 2;
  return kSuccess;
}

int nvmlDeviceGetMemoryInfo(nvmlDevice_st*, nvmlMemory_t* m) {
  m->total = 80ull << 30;
  m->used = 12ull << 30;
  m->free = m->total - m->used;
  return kSuccess;
}

int nvmlDeviceGetPowerUsage(nvmlDevice_st* device, unsigned* milliwatts) {
  if (!device->power) return kNotSupported;
  *milliwatts = 250500;
  return kSuccess;
}

int nvmlDeviceGetPowerManagementLimit(nvmlDevice_st* device, unsigned* milliwatts) {
  if (!device->power) return kNotSupported;
  *milliwatts = 700000;
  return kSuccess;
}

int nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_st* device, unsigned long long* millijoules) {
  if (!device->power) return kNotSupported;
  energy_mj += 2500;
  *millijoules = energy_mj;
  return kSuccess;
}

}  // extern "C"
