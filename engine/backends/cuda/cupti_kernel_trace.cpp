// CUPTI's kernel activity records, summed per kernel for `convoy bench --profile`.
//
// Every CUPTI entry point is looked up in a library opened with dlopen: nothing links against
// libcupti, so a runtime image without it still runs, and the trace says why it has no kernels.
// The trace's state is process-wide because CUPTI's is: the buffer callbacks carry no pointer of
// ours, and one Activity API serves every device and thread; hence one trace at a time.
#include "engine/backends/cuda/cupti_kernel_trace.h"

#include <cuda_runtime.h>
#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <map>
#include <mutex>
#include <string_view>
#include <type_traits>
#include <vector>

// Without CUPTI's headers (a toolkit without cuda-cupti-dev) the trace only says so.
#if __has_include(<cupti.h>)
#include <cupti.h>
#define CONVOY_HAVE_CUPTI 1
#endif

namespace convoy::cuda {
namespace {

constexpr size_t kMaxName = 96;  // a kernel table's name column

// `name` with every template argument list nested `depth` or more deep written "<...>";
// unchanged where the brackets do not balance (an operator< in a name).
std::string collapse_templates(const std::string& name, int depth) {
  std::string out;
  int level = 0;
  for (char c : name) {
    const int before = level;
    if (c == '<') ++level;
    if (c == '>' && --level < 0) return name;
    if (before < depth && level < depth) out += c;
    else if (before < depth) out += "<...";  // a list at `depth` opens
    else if (level < depth) out += '>';      // and closes
  }
  return level == 0 ? out : name;
}

}  // namespace

std::string short_kernel_name(const char* raw) {
  if (raw == nullptr || *raw == '\0') return "(unnamed kernel)";
  std::string name = raw;
  int status = 0;
  if (char* demangled = abi::__cxa_demangle(raw, nullptr, nullptr, &status)) {  // C names: nullptr
    if (status == 0) name = demangled;
    std::free(demangled);
  }
  for (size_t at; (at = name.find("(anonymous namespace)::")) != std::string::npos;)
    name.erase(at, std::string_view("(anonymous namespace)::").size());
  if (name.starts_with("void ")) name.erase(0, 5);  // a template kernel's return type
  // The parameter list: the template arguments already say the types, at length.
  if (name.ends_with(")")) {
    int level = 0;
    for (size_t i = name.size(); i-- > 0;) {
      if (name[i] == ')') ++level;
      if (name[i] == '(' && --level == 0) {
        if (i > 0) name.erase(i);
        break;
      }
    }
  }
  if (name.size() > kMaxName) name = collapse_templates(name, 2);
  if (name.size() > kMaxName) {  // keep both ends: cuDNN's names differ at the end as often as at the start
    const size_t head = (kMaxName - 3) * 2 / 3;
    name = name.substr(0, head) + "..." + name.substr(name.size() - (kMaxName - 3 - head));
  }
  return name;
}

#ifndef CONVOY_HAVE_CUPTI

std::string cupti_unavailable_reason() { return "built without CUPTI's headers (cupti.h)"; }

std::unique_ptr<KernelTrace> start_kernel_trace(int, std::string& why_not) {
  why_not = cupti_unavailable_reason();
  return nullptr;
}

#else

namespace {

// The CUPTI entry points used, with the header's own signatures, from the library opened at run time.
struct CuptiApi {
  decltype(&cuptiGetVersion) get_version = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  std::string error;  // why libcupti is unusable; empty when it is
};

std::string failed(const CuptiApi& api, const char* call, CUptiResult result) {
  const char* text = nullptr;
  if (api.result_string == nullptr || api.result_string(result, &text) != CUPTI_SUCCESS || text == nullptr)
    text = "unknown error";
  return std::string(call) + " failed: " + text + " (CUptiResult " + std::to_string(static_cast<int>(result)) + ")";
}

CuptiApi load_cupti() {
  CuptiApi api;
  // This build's CUDA major version: the kernel record's layout below is that version's.
  const std::string major = std::to_string(CUDART_VERSION / 1000);
  const std::string soname = "libcupti.so." + major;
  void* lib = nullptr;
  std::string first_error;
  for (const std::string& path : {soname, std::string("libcupti.so"), "/usr/local/cuda/lib64/" + soname,
                                  "/usr/local/cuda/extras/CUPTI/lib64/" + soname}) {
    if ((lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    if (const char* e = dlerror(); e != nullptr && first_error.empty()) first_error = e;
  }
  if (lib == nullptr) {
    api.error = soname + " cannot be loaded (" + first_error + "): install the CUDA toolkit's CUPTI (cuda-cupti-" +
                major + "-" + std::to_string(CUDART_VERSION % 1000 / 10) + ") or add its folder to LD_LIBRARY_PATH";
    return api;
  }
  // Never closed: CUPTI keeps threads and hooks in the driver for the life of the process.
  auto find = [&](auto& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, symbol));
    if (fn == nullptr && api.error.empty()) api.error = "libcupti has no " + std::string(symbol);
  };
  find(api.get_version, "cuptiGetVersion");
  find(api.result_string, "cuptiGetResultString");
  find(api.register_callbacks, "cuptiActivityRegisterCallbacks");
  find(api.enable, "cuptiActivityEnable");
  find(api.disable, "cuptiActivityDisable");
  find(api.flush_all, "cuptiActivityFlushAll");
  find(api.next_record, "cuptiActivityGetNextRecord");
  if (!api.error.empty()) return api;
  uint32_t version = 0;
  if (const CUptiResult r = api.get_version(&version); r != CUPTI_SUCCESS)
    api.error = failed(api, "cuptiGetVersion", r);
  else if (version / 10000 != CUPTI_API_VERSION / 10000)  // 130001: CUDA 13's; older ones were 2-digit
    api.error = "libcupti's API version " + std::to_string(version) + " is not this build's (" +
                std::to_string(CUPTI_API_VERSION) + "): its kernel records may be laid out otherwise";
  return api;
}

const CuptiApi& cupti() {
  static const CuptiApi api = load_cupti();
  return api;
}

struct KernelTotals {
  int64_t calls = 0;
  uint64_t ns = 0;
};

struct TraceState {
  std::atomic<bool> active{false};    // a trace is on
  bool callbacks_registered = false;  // touched only by the trace that set `active`
  std::mutex mutex;                   // guards `kernels`: CUPTI may deliver buffers on a thread of its own
  std::map<std::string, KernelTotals, std::less<>> kernels;  // by the name CUPTI gives (mangled)
  std::atomic<bool> lost{false};      // a buffer could not be read (out of memory)
};

TraceState& trace_state() {
  static TraceState state;
  return state;
}

constexpr size_t kBufferBytes = size_t(4) << 20;  // ~20k kernel records

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  // Records must start 8-byte aligned; nullptr makes CUPTI drop records rather than fail.
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_bytes) {
  TraceState& state = trace_state();
  try {
    std::lock_guard lock(state.mutex);
    CUpti_Activity* record = nullptr;
    while (buffer != nullptr && cupti().next_record(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
      if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
        continue;
      // The kernel record of cupti_activity.h at this CUDA major version (load_cupti checked it);
      // name, start and end have sat at the same offsets since CUpti_ActivityKernel4.
      const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      const std::string_view name = kernel->name != nullptr ? kernel->name : "";
      auto it = state.kernels.find(name);
      if (it == state.kernels.end()) it = state.kernels.emplace(std::string(name), KernelTotals{}).first;
      ++it->second.calls;
      // Both times 0: CUPTI had no device memory to time it; counted, not timed.
      if (kernel->end > kernel->start) it->second.ns += kernel->end - kernel->start;
    }
  } catch (...) {  // never unwind into CUPTI
    state.lost = true;
  }
  std::free(buffer);
}

class CuptiKernelTrace final : public KernelTrace {
 public:
  explicit CuptiKernelTrace(int device) : device_(device) {}
  ~CuptiKernelTrace() override {
    std::string ignored;
    if (!stopped_) stop(ignored);
  }

  std::vector<KernelTime> stop(std::string& why_not) override {
    if (stopped_) {
      why_not = "the kernel trace was stopped already";
      return {};
    }
    stopped_ = true;
    TraceState& state = trace_state();
    struct Release {  // the next trace may start however this one ends
      TraceState& state;
      ~Release() { state.active = false; }
    } release{state};
    try {
      return finish(state, why_not);
    } catch (const std::exception& e) {
      why_not = std::string("the kernel trace failed: ") + e.what();
      return {};
    }
  }

 private:
  std::vector<KernelTime> finish(TraceState& state, std::string& why_not) {
    const CuptiApi& api = cupti();
    std::string failure;
    // Records of kernels still running come back without times: let the queued work end first.
    int previous = -1;
    cudaError_t err = cudaGetDevice(&previous);
    if (err == cudaSuccess) err = cudaSetDevice(device_);
    if (err == cudaSuccess) err = cudaDeviceSynchronize();
    if (previous >= 0) cudaSetDevice(previous);
    if (err != cudaSuccess) failure = std::string("cudaDeviceSynchronize failed: ") + cudaGetErrorString(err);
    // Disabled before the flush, which hands every buffer, full or not, to buffer_completed before
    // it returns. (No cuptiFinalize: CUPTI torn down and started again breaks CUDA graphs.)
    if (const CUptiResult r = api.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); r != CUPTI_SUCCESS && failure.empty())
      failure = failed(api, "cuptiActivityDisable", r);
    if (const CUptiResult r = api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); r != CUPTI_SUCCESS && failure.empty())
      failure = failed(api, "cuptiActivityFlushAll", r);
    std::map<std::string, KernelTotals, std::less<>> raw;
    {
      std::lock_guard lock(state.mutex);
      raw.swap(state.kernels);
    }
    if (state.lost && failure.empty()) failure = "kernel records were lost (out of host memory)";
    if (!failure.empty()) {
      why_not = failure;
      return {};
    }
    // Instantiations whose short names agree are one row: a table could not tell them apart.
    std::map<std::string, KernelTotals> by_name;
    for (const auto& [name, totals] : raw) {
      KernelTotals& t = by_name[short_kernel_name(name.c_str())];
      t.calls += totals.calls;
      t.ns += totals.ns;
    }
    std::vector<KernelTime> kernels;
    for (const auto& [name, t] : by_name) kernels.push_back({name, t.calls, static_cast<double>(t.ns) / 1e6});
    std::stable_sort(kernels.begin(), kernels.end(),
                     [](const KernelTime& a, const KernelTime& b) { return a.total_ms > b.total_ms; });
    return kernels;
  }

  int device_;
  bool stopped_ = false;
};

}  // namespace

std::string cupti_unavailable_reason() {
  try {
    return cupti().error;
  } catch (const std::exception& e) {
    return std::string("CUPTI cannot be loaded: ") + e.what();
  }
}

std::unique_ptr<KernelTrace> start_kernel_trace(int device, std::string& why_not) {
  if (why_not = cupti_unavailable_reason(); !why_not.empty()) return nullptr;
  TraceState& state = trace_state();
  if (bool idle = false; !state.active.compare_exchange_strong(idle, true)) {
    why_not = "another kernel trace is on (CUPTI traces the whole process, one trace at a time)";
    return nullptr;
  }
  const CuptiApi& api = cupti();
  bool enabled = false;
  try {
    {
      std::lock_guard lock(state.mutex);
      state.kernels.clear();
    }
    state.lost = false;
    CUptiResult r = CUPTI_SUCCESS;
    if (!state.callbacks_registered) {
      if ((r = api.register_callbacks(buffer_requested, buffer_completed)) != CUPTI_SUCCESS)
        why_not = failed(api, "cuptiActivityRegisterCallbacks", r);
      state.callbacks_registered = why_not.empty();
    }
    // Fails where another profiler (Nsight Systems, say) holds CUPTI.
    if (why_not.empty() && (r = api.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) != CUPTI_SUCCESS)
      why_not = failed(api, "cuptiActivityEnable(CONCURRENT_KERNEL)", r);
    enabled = why_not.empty();
    if (enabled) return std::make_unique<CuptiKernelTrace>(device);
  } catch (const std::exception& e) {
    if (enabled) api.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    why_not = std::string("the kernel trace cannot start: ") + e.what();
  }
  state.active = false;
  return nullptr;
}

#endif  // CONVOY_HAVE_CUPTI

}  // namespace convoy::cuda
