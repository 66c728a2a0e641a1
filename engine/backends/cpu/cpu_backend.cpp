// The CPU backend: the host allocator, one oneDNN engine and stream, and CpuOps.
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/backends/cpu/cpu_loops.h"
#include "engine/backends/cpu/cpu_ops.h"
#include "engine/backends/backend.h"
#include "engine/core/error.h"
#include "engine/core/usable_cpus.h"

namespace convoy {

namespace {

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

// The instruction set oneDNN's kernels use on this machine. Spelled through the C enum, whose
// names below exist (some as aliases) in both oneDNN 2.x and 3.x.
std::string onednn_isa() {
  const int isa = static_cast<int>(dnnl_get_effective_cpu_isa());
  const struct {
    dnnl_cpu_isa_t value;
    const char* name;
  } known[] = {
      {dnnl_cpu_isa_sse41, "sse41"},
      {dnnl_cpu_isa_avx, "avx"},
      {dnnl_cpu_isa_avx2, "avx2"},
      {dnnl_cpu_isa_avx2_vnni, "avx2_vnni"},
      {dnnl_cpu_isa_avx512_core, "avx512_core"},
      {dnnl_cpu_isa_avx512_core_vnni, "avx512_core_vnni"},
      {dnnl_cpu_isa_avx512_core_bf16, "avx512_core_bf16"},
      {dnnl_cpu_isa_avx512_core_amx, "avx512_core_amx"},
  };
  for (const auto& k : known)
    if (static_cast<int>(k.value) == isa) return k.name;
  char buf[32];
  std::snprintf(buf, sizeof buf, "isa 0x%x", static_cast<unsigned>(isa));
  return buf;
}

std::string onednn_runtime() {
  switch (dnnl_version()->cpu_runtime) {
    case DNNL_RUNTIME_SEQ: return "sequential";
    case DNNL_RUNTIME_OMP: return "OpenMP";
    case DNNL_RUNTIME_TBB: return "TBB";
    case DNNL_RUNTIME_THREADPOOL: return "threadpool";
    default: return "runtime " + std::to_string(dnnl_version()->cpu_runtime);
  }
}

int effective_threads(int requested) { return requested > 0 ? requested : omp_get_max_threads(); }

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const BackendOptions& options)
      : engine_(make_engine()), stream_(engine_), ops_(engine_, stream_, options.threads),
        threads_(options.threads) {}

  Device device() const override { return Device::cpu(); }
  const std::shared_ptr<Allocator>& allocator() const override { return cpu_allocator(); }
  Ops& ops() override {
    if (failed_) throw DeviceError(kInjectedFailure);
    return ops_;
  }
  void synchronize() override {  // oneDNN's CPU stream runs each primitive to completion
    if (failed_) throw DeviceError(kInjectedFailure);
  }
  void inject_device_error() override { failed_ = true; }
  std::unique_ptr<KernelTrace> trace_kernels(std::string& why_not) override {
    why_not = "no GPU kernels on the CPU path (oneDNN runs the ops on the host)";
    return nullptr;
  }
  uint64_t free_memory() const override {
    // The kernel's estimate of what can be allocated without swapping (MemAvailable, in kB).
    std::FILE* f = std::fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    std::fclose(f);
    return static_cast<uint64_t>(kb) * 1024;
  }
  std::string describe() const override {
    return "cpu: oneDNN " + onednn_version() + ", " + std::to_string(effective_threads(threads_)) +
           " threads, " + onednn_isa();
  }

 private:
  static dnnl::engine make_engine() {
    try {
      return dnnl::engine(dnnl::engine::kind::cpu, 0);
    } catch (const dnnl::error& e) {
      throw DeviceError(std::string("cannot create oneDNN's CPU engine: ") + e.what());
    }
  }

  static constexpr const char* kInjectedFailure =
      "cpu: device error injected by CONVOY_FAULT_INJECT (a GPU would report cudaErrorDevicesUnavailable "
      "or an uncorrectable ECC error here)";

  dnnl::engine engine_;
  dnnl::stream stream_;
  cpu::CpuOps ops_;
  int threads_;
  bool failed_ = false;  // inject_device_error(): sticky, as a CUDA context's errors are
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options) {
  if (options.threads < 0 || options.threads > cpu::kMaxOmpThreads)
    throw InputError("threads must be 0 (all cores) or 1 ... " + std::to_string(cpu::kMaxOmpThreads) + ", got " +
                     std::to_string(options.threads));
  try {
    return std::make_unique<CpuBackend>(options);
  } catch (const dnnl::error& e) {
    throw DeviceError(std::string("cannot start the CPU backend: ") + e.what());
  }
}

std::vector<std::string> cpu_doctor_lines() {
  const dnnl_version_t* v = dnnl_version();
  std::vector<std::string> lines;
  lines.push_back("oneDNN " + onednn_version() + " (commit " + std::string(v->hash) + "), " +
                  onednn_runtime() + " threading");
  lines.push_back("CPU ISA used by oneDNN: " + onednn_isa());
  const CpuBudget cpus = cpu_budget();
  std::string quota = "no CPU quota";
  if (cpus.quota) {
    std::ostringstream q;
    q << "a CPU quota of " << *cpus.quota << " CPUs (cgroup)";
    quota = q.str();
  }
  lines.push_back("CPU threads: " + std::to_string(omp_get_max_threads()) + " (OpenMP), " +
                  std::to_string(std::thread::hardware_concurrency()) + " hardware threads, " +
                  std::to_string(cpus.affinity) + " in this process's affinity, " + quota);
  lines.push_back("CPU precision: f32 (bf16 is a GPU precision)");
  return lines;
}

}  // namespace convoy
