// The CUDA backend: device checks that never crash on a machine without a GPU or driver,
// the doctor's report, and the Backend that owns the stream, handles and allocator.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <memory>
#include <string>
#include <vector>

#include "engine/backends/cuda/cuda_uploader.h"
#include "engine/backends/cuda/cuda_allocator.h"
#include "engine/backends/cuda/cudnn_cublas_check.h"
#include "engine/backends/cuda/cuda_context.h"
#include "engine/backends/cuda/cuda_eight_bit.h"
#include "engine/backends/cuda/cuda_graph.h"
#include "engine/backends/cuda/cuda_ops.h"
#include "engine/backends/cuda/cupti_kernel_trace.h"
#include "engine/backends/backend.h"
#include "kernels/probe.cuh"

namespace convoy {

namespace {

std::string cuda_version_str(int v) {  // 13000 -> "13.0"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string cudnn_version_str(size_t v) {  // 91400 -> "9.14.0"
  return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." + std::to_string(v % 100);
}

std::string cublas_version_str() {
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS)
    return "unknown";
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

// The kernel module's release ("580.65.06"), where /proc says; empty elsewhere.
std::string driver_release() {
  std::ifstream f("/proc/driver/nvidia/version");
  std::string line;
  if (!f || !std::getline(f, line)) return "";
  // "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ...":
  // the first word of digits and dots.
  std::istringstream words(line);
  std::string w;
  while (words >> w)
    if (w.find('.') != std::string::npos && w.find_first_not_of("0123456789.") == std::string::npos)
      return w;
  return "";
}

std::string gib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

// Device count, or a reason why there is none. Clears the runtime's error state.
int device_count(std::string& why) {
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) {
    cudaGetLastError();
    why = "no NVIDIA driver found (libcuda.so.1 is not installed or not visible; in a container, "
          "start it with --gpus all)";
    return 0;
  }
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  cudaGetLastError();
  if (err == cudaErrorInsufficientDriver) {
    why = "the NVIDIA driver supports CUDA " + cuda_version_str(driver) + " but this build needs CUDA " +
          cuda_version_str(runtime) + " (cudaErrorInsufficientDriver): update the driver";
    return 0;
  }
  if (err == cudaErrorNoDevice || (err == cudaSuccess && count == 0)) {
    why = "no CUDA device found (NVIDIA driver for CUDA " + cuda_version_str(driver) + " present)";
    return 0;
  }
  if (err != cudaSuccess) {
    why = std::string("CUDA cannot start: ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
    return 0;
  }
  return count;
}

// Empty when device `index` can run this build's kernels.
std::string device_problem(int index, int count) {
  if (index < 0 || index >= count)
    return "cuda:" + std::to_string(index) + " does not exist: this machine has " +
           std::to_string(count) + " CUDA device" + (count == 1 ? "" : "s") +
           (count > 0 ? " (cuda:0" + (count > 1 ? std::string("..cuda:") + std::to_string(count - 1) : "") + ")" : "");
  cudaDeviceProp prop{};
  cudaError_t err = cudaGetDeviceProperties(&prop, index);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return "cuda:" + std::to_string(index) + ": " + cudaGetErrorString(err);
  }
  int previous = 0;
  cudaGetDevice(&previous);
  err = cudaSetDevice(index);
  if (err == cudaSuccess) err = kernels::probe_kernel_image();
  cudaGetLastError();
  cudaSetDevice(previous);
  cudaGetLastError();
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction ||
      err == cudaErrorUnsupportedPtxVersion)
    return "cuda:" + std::to_string(index) + " (" + prop.name + ", compute capability " +
           std::to_string(prop.major) + "." + std::to_string(prop.minor) +
           ") cannot run this build's kernels: rebuild with CMAKE_CUDA_ARCHITECTURES=" +
           std::to_string(prop.major) + std::to_string(prop.minor);
  if (err != cudaSuccess)
    return "cuda:" + std::to_string(index) + " (" + prop.name + "): " + cudaGetErrorName(err) + " (" +
           cudaGetErrorString(err) + ")";
  return "";
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(int index, const BackendOptions& options) {
    auto alloc = std::make_shared<cuda::CudaAllocator>(index);  // sets the device, makes the stream
    allocator_ = alloc;
    ctx_.device = index;
    ctx_.stream = static_cast<cudaStream_t>(alloc->stream());
    ctx_.allocator = alloc.get();
    ctx_.tensors = alloc;
    ctx_.deterministic = options.deterministic;
    ctx_.benchmark = options.benchmark;
    ctx_.tf32 = options.tf32;
    ctx_.tunables = options.cuda;
    cudaDeviceProp prop{};
    CONVOY_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    ctx_.sm_count = prop.multiProcessorCount;
    cc_major_ = prop.major;
    cc_minor_ = prop.minor;
    try {
      CONVOY_CUDNN_CHECK(cudnnCreate(&ctx_.cudnn));
      CONVOY_CUDNN_CHECK(cudnnSetStream(ctx_.cudnn, ctx_.stream));
      CONVOY_CUBLAS_CHECK(cublasCreate(&ctx_.cublas));
      CONVOY_CUBLAS_CHECK(cublasSetStream(ctx_.cublas, ctx_.stream));
      // f32 GEMMs (CUBLAS_COMPUTE_32F) stay exact unless TF32 is asked for.
      CONVOY_CUBLAS_CHECK(cublasSetMathMode(ctx_.cublas, options.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
      // cuBLAS's workspace from our allocator: no allocation of its own later (and
      // CUDA-graph capture needs that).
      cublas_workspace_.bind(ctx_.allocator);
      constexpr size_t kCublasWorkspace = size_t(32) << 20;
      CONVOY_CUBLAS_CHECK(cublasSetWorkspace(ctx_.cublas, cublas_workspace_.get(kCublasWorkspace),
                                             kCublasWorkspace));
      ops_ = std::make_unique<cuda::CudaOps>(ctx_);
    } catch (...) {
      destroy_handles();
      throw;
    }
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    describe_ = "cuda:" + std::to_string(index) + " (" + prop.name + ", compute capability " +
                std::to_string(prop.major) + "." + std::to_string(prop.minor) + ", " +
                gib(prop.totalGlobalMem) + "), CUDA runtime " + cuda_version_str(runtime) +
                ", cuDNN " + cudnn_version_str(cudnnGetVersion()) + ", cuBLAS " +
                cublas_version_str() + (options.tf32 ? ", TF32 math" : "") + (options.deterministic ? ", deterministic" : "") +
                (options.benchmark ? "" : ", cuDNN heuristics");
  }

  ~CudaBackend() override {
    cudaSetDevice(ctx_.device);
    cudaStreamSynchronize(ctx_.stream);
    ops_.reset();
    destroy_handles();
    cublas_workspace_.reset();
    // The allocator (and the stream it owns) lives on while any tensor holds it.
  }

  Device device() const override { return Device::cuda(ctx_.device); }
  const std::shared_ptr<Allocator>& allocator() const override { return allocator_; }
  Ops& ops() override {
    CONVOY_CUDA_CHECK(cudaSetDevice(ctx_.device));
    return *ops_;
  }
  void synchronize() override {
    CONVOY_CUDA_CHECK(cudaSetDevice(ctx_.device));
    CONVOY_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  }
  void inject_device_error() override {
    CONVOY_CUDA_CHECK(cudaSetDevice(ctx_.device));
    kernels::device_fault(ctx_.stream);
  }
  std::string describe() const override { return describe_; }
  uint64_t free_memory() const override {
    // What the driver has free (blocks Convoy's caching allocator keeps are not counted).
    CONVOY_CUDA_CHECK(cudaSetDevice(ctx_.device));
    size_t free_bytes = 0, total = 0;
    if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) return 0;
    return static_cast<uint64_t>(free_bytes);
  }
  std::unique_ptr<BatchUploader> make_batch_uploader() override {
    return cuda::make_cuda_batch_uploader(allocator_, ctx_.device, ctx_.stream);
  }
  std::unique_ptr<RecordedWork> record(const std::function<void()>& work) override {
    CONVOY_CUDA_CHECK(cudaSetDevice(ctx_.device));
    return cuda::record_graph(ctx_, allocator_, work);
  }
  std::unique_ptr<KernelTrace> trace_kernels(std::string& why_not) override {
    return cuda::start_kernel_trace(ctx_.device, why_not);
  }
  std::string eight_bit_unsupported_reason(EightBitType type) const override {
    return cuda::quant_unsupported_reason(cuda::quant_type(type), cc_major_, cc_minor_);
  }
  std::unique_ptr<CompiledForward> compile_8bit(const EightBitGraph& graph, int64_t batch) override {
    if (std::string why = eight_bit_unsupported_reason(graph.type); !why.empty()) throw InputError(why);
    CONVOY_CUDA_CHECK(cudaSetDevice(ctx_.device));
    return cuda::compile_eight_bit(ctx_, *ops_, graph, batch);
  }
  // cuDNN's tensor-core convolutions (bf16, f16, TF32) read and write channels-last; given bf16
  // NCHW it picks legacy kernels and transposes (measured on the H200: most of an fmnet step's
  // time). Exact f32 runs on the FMA pipes, fastest in nchw (ResNet-50: 879 against 480 img/s).
  Layout preferred_layout(DType compute) const override {
    return compute == DType::bf16 || compute == DType::f16 || ctx_.tf32 ? Layout::nhwc : Layout::nchw;
  }

 private:
  void destroy_handles() {
    if (ctx_.cublas) cublasDestroy(ctx_.cublas);
    if (ctx_.cudnn) cudnnDestroy(ctx_.cudnn);
    ctx_.cublas = nullptr;
    ctx_.cudnn = nullptr;
  }

  std::shared_ptr<Allocator> allocator_;
  cuda::CudaContext ctx_;
  cuda::ScratchBuffer cublas_workspace_;
  std::unique_ptr<cuda::CudaOps> ops_;
  std::string describe_;
  int cc_major_ = 0, cc_minor_ = 0;  // compute capability
};

}  // namespace

std::string cuda_unavailable_reason() {
  std::string why;
  const int count = device_count(why);
  if (count == 0) return why;
  return device_problem(0, count);
}

std::unique_ptr<Backend> make_cuda_backend(int device_index, const BackendOptions& options) {
  std::string why;
  const int count = device_count(why);
  if (count == 0) throw DeviceError("cuda:" + std::to_string(device_index) + " cannot be used: " + why);
  if (std::string problem = device_problem(device_index, count); !problem.empty())
    throw DeviceError(problem);
  return std::make_unique<CudaBackend>(device_index, options);
}

std::vector<std::string> cuda_doctor_lines() {
  std::vector<std::string> lines;
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cudaGetLastError();
  const std::string release = driver_release();
  lines.push_back("CUDA driver: " +
                  (driver ? (release.empty() ? "" : release + ", ") + "supports CUDA " + cuda_version_str(driver)
                          : std::string("not found")));
  lines.push_back("CUDA runtime: " + cuda_version_str(runtime) + " (built with " +
                  cuda_version_str(CUDART_VERSION) + ")");
  lines.push_back("cuDNN: " + cudnn_version_str(cudnnGetVersion()) + " (built with " +
                  cudnn_version_str(CUDNN_VERSION) + ")");
  lines.push_back("cuBLAS: " + cublas_version_str());
  std::string why;
  const int count = device_count(why);
  if (count == 0) {
    lines.push_back("GPUs: none usable: " + why);
    return lines;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
      cudaGetLastError();
      lines.push_back("cuda:" + std::to_string(i) + ": properties unavailable");
      continue;
    }
    std::string line = "cuda:" + std::to_string(i) + ": " + prop.name + ", " + gib(prop.totalGlobalMem) +
                       ", compute capability " + std::to_string(prop.major) + "." +
                       std::to_string(prop.minor) + ", " + std::to_string(prop.multiProcessorCount) +
                       " SMs";
    if (std::string problem = device_problem(i, count); !problem.empty()) line += " — unusable: " + problem;
    lines.push_back(line);
  }
  return lines;
}

}  // namespace convoy
