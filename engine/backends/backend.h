#pragma once
// Backend: one per device kind. Owns the allocator, streams and library handles, and
// implements the op set. Handles travel here, never in globals.
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backends/eight_bit.h"
#include "engine/ops/ops.h"
#include "engine/core/engine_options.h"
#include "engine/core/tensor.h"

namespace convoy {

struct BackendOptions {
  bool deterministic = false;  // pick deterministic algorithms (cuDNN)
  bool benchmark = true;       // cuDNN: time the algorithms once per shape, else take its heuristics' pick
  int threads = 0;             // CPU threads; 0 = all cores
  // f32 convolutions and GEMMs on TF32 tensor cores (10-bit mantissa products, f32 sums), as
  // PyTorch's allow_tf32; CUDA only (the CPU computes f32 as it is). Off: f32 stays exact.
  bool tf32 = false;
  CudaTunables cuda;  // CUDA only: comparison and debugging switches (EngineOptions::cuda)
};

// Host batches to the device for the training loop. On CUDA: pinned host memory, a copy
// stream of its own, and a ring of device buffers, so each batch's copy overlaps the step
// before it. Elsewhere: the tensor as it is.
class BatchUploader {
 public:
  virtual ~BatchUploader() = default;
  // Host memory for a batch that upload() copies fastest (pinned on CUDA). Thread-safe: the
  // loader's workers call it.
  virtual Tensor host_empty(Shape shape, DType dtype) = 0;
  // `host` on the device, ready for work queued after this call; the copy overlaps work queued
  // before it. The result stays valid until upload() has been called kSlots more times. `host`
  // may also be on this device already (a batch decoded there), and is then copied the same way.
  virtual Tensor upload(const Tensor& host) = 0;
  static constexpr int kSlots = 4;  // two steps of (images, labels)

  // The way back: queues a copy of `device` (this backend's, written by work queued before this
  // call) into `host` (same shape and dtype, from host_empty) behind that work, and returns at
  // once; wait() on the result returns when the copy has landed. Inference keeps the device busy
  // with the next batch meanwhile. The default copies before it returns.
  class Download {
   public:
    virtual ~Download() = default;
    virtual void wait() = 0;
  };
  virtual std::unique_ptr<Download> download(const Tensor& device, Tensor& host) = 0;
};

// Device work recorded once and replayed (a CUDA graph): one launch instead of one per op.
// Replays read and write the very buffers the recording used.
class RecordedWork {
 public:
  virtual ~RecordedWork() = default;
  // Queues the recorded work again.
  virtual void replay() = 0;
  // False once a buffer the recording used has been reallocated (a scratch buffer outgrown by
  // a larger shape): replaying would touch memory the work no longer owns, so record again.
  virtual bool valid() const = 0;
};

// One GPU kernel over a KernelTrace.
struct KernelTime {
  std::string name;     // demangled, long template and parameter lists cut short
  int64_t calls = 0;    // launches that ran while the trace was on
  double total_ms = 0;  // their run time on the device, summed
};

// The GPU kernels that run while it is on, for `convoy bench --profile` (CUDA: CUPTI's activity
// records). One at a time per process: the tracer behind it is process-wide.
class KernelTrace {
 public:
  virtual ~KernelTrace() = default;  // stops a trace that was not stopped, dropping its kernels
  // Waits for the device's queued work, ends the trace and returns every kernel that ran since it
  // began (any stream of the process), slowest first. Empty, with the reason in `why_not`, where
  // the kernels could not be collected; never throws.
  virtual std::vector<KernelTime> stop(std::string& why_not) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual const std::shared_ptr<Allocator>& allocator() const = 0;
  virtual Ops& ops() = 0;
  // Waits until all queued work on the device is done.
  virtual void synchronize() = 0;
  // One line: the device and the libraries behind it.
  virtual std::string describe() const = 0;
  // Bytes the device can still give out now (host RAM available, or the GPU's free memory); 0 when
  // it cannot tell. `convoy serve` refuses a model that would not fit.
  virtual uint64_t free_memory() const = 0;
  // Test hook (EngineOptions::fault_inject_step): the device fails as a GPU that falls
  // off the bus or hits an uncorrectable ECC error does. CUDA: a kernel that traps, a real
  // sticky error, so the next synchronisation or read-back throws DeviceError through the
  // usual check and every CUDA call after it fails. CPU: every op call from now on throws
  // DeviceError (no op runs on a failed device).
  virtual void inject_device_error() = 0;
  // The activation layout this backend computes fastest in at `compute` dtype (Model::to).
  virtual Layout preferred_layout(DType /*compute*/) const { return Layout::nchw; }

  Tensor empty(Shape shape, DType dtype, Layout layout = Layout::nchw) const {
    return Tensor(std::move(shape), dtype, allocator(), layout);
  }
  Tensor zeros(Shape shape, DType dtype, Layout layout = Layout::nchw) const {
    Tensor t = empty(std::move(shape), dtype, layout);
    t.zero_();
    return t;
  }
  // The tensor on this backend's device (shared, not copied, when already there).
  Tensor upload(const Tensor& t) const { return t.device() == device() ? t : t.to(allocator()); }
  // The training loop's batch uploads (see BatchUploader); the default hands tensors through upload().
  virtual std::unique_ptr<BatchUploader> make_batch_uploader();
  // Records the device work that `work` queues (it must not wait for the device) for replay;
  // memory that `work` frees stays with the recording. nullptr where this backend cannot
  // record (the CPU: there is no launch overhead to save); throws DeviceError when the
  // recording failed.
  virtual std::unique_ptr<RecordedWork> record(const std::function<void()>& /*work*/) { return nullptr; }
  // Why this device cannot run 8-bit inference in `type` ("" where it can): the CPU runs int8
  // through its own inference plans (InferencePlan), not this; a GPU needs the type's tensor cores.
  virtual std::string eight_bit_unsupported_reason(EightBitType type) const {
    return std::string(eight_bit_name(type)) + " plans of this kind run on CUDA GPUs; " + device().str() +
           " runs int8 through its inference plans";
  }
  // `graph` compiled for `batch` images a pass (CompiledForward); throws InputError where
  // eight_bit_unsupported_reason says why not.
  virtual std::unique_ptr<CompiledForward> compile_8bit(const EightBitGraph& graph, int64_t batch);
  // Starts a trace of the GPU kernels the process launches (KernelTrace). nullptr, with the reason
  // in `why_not`, where there are none (the CPU) or they cannot be traced (no CUPTI library,
  // another trace on); never throws.
  virtual std::unique_ptr<KernelTrace> trace_kernels(std::string& why_not) {
    why_not = "no kernel tracer on " + device().str();
    return nullptr;
  }
};

// The activation layout for a config's choice: "auto" (the backend's preferred layout at
// `compute`), "nchw" or "nhwc". The CPU path computes in nchw only, whatever the choice.
inline Layout choose_layout(std::string_view choice, const Backend& backend, DType compute) {
  if (choice == "auto" || backend.device().is_cpu()) return backend.preferred_layout(compute);
  return choice == "nhwc" ? Layout::nhwc : Layout::nchw;
}

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options);

// CUDA: defined by engine/backends/cuda when CONVOY_CUDA is on, by a stub otherwise.
// Empty when a GPU is usable, else why not ("CUDA not compiled in", "no NVIDIA driver", ...).
std::string cuda_unavailable_reason();
// Throws DeviceError when the device cannot be used.
std::unique_ptr<Backend> make_cuda_backend(int device_index, const BackendOptions& options);
// Lines for `convoy doctor`: driver, runtime, cuDNN, cuBLAS, GPUs.
std::vector<std::string> cuda_doctor_lines();

// Lines for `convoy doctor` about the CPU path: oneDNN version, ISA, threads.
std::vector<std::string> cpu_doctor_lines();

// device: "auto", "cpu", "cuda" or "cuda:N". "auto" falls back to the CPU and writes one
// line to `log` saying why; "cuda" on a machine without a usable GPU is a DeviceError.
std::unique_ptr<Backend> select_backend(std::string_view device, const BackendOptions& options,
                                        std::ostream& log);

}  // namespace convoy
