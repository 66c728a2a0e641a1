// CUDA shared memory (Triton's extension): a client's device memory, opened from its
// cudaIpcMemHandle_t on the GPU it was made on. Built with CUDA only (cuda_shared_memory_unavailable.cpp
// otherwise).
#include <cuda.h>  // CUresult and CUdeviceptr for cuMemGetAddressRange's type; libcuda is not linked
#include <cuda_runtime_api.h>

#include <cstring>
#include <string>

#include "apps/serve/shared_memory.h"
#include "kernels/cuda_runtime_check.h"

namespace convoy::serve {

namespace {

[[noreturn]] void bad(const std::string& what) { throw RequestError(400, what); }

// Makes `device` current for its scope and puts the caller's back: the I/O and instance threads
// that call in here have their own current device.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    CONVOY_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceScope() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
};

// The bytes from `ptr` to the end of its allocation, through the driver's cuMemGetAddressRange
// (found at run time: the binary must start where no driver is installed); 0 when it cannot say.
size_t bytes_to_allocation_end(void* ptr) {
  using GetRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || fn == nullptr) {
    cudaGetLastError();
    return 0;
  }
  CUdeviceptr base = 0;
  size_t size = 0;
  const auto p = reinterpret_cast<CUdeviceptr>(ptr);
  if (reinterpret_cast<GetRange>(fn)(&base, &size, p) != CUDA_SUCCESS) return 0;
  return static_cast<size_t>(base + size - p);
}

// The client's allocation, opened in this process (cudaIpcOpenMemHandle) until the last request
// using it is done; copies to and from it run on a stream of its own, not the legacy default stream,
// which would wait for the instances' work.
class CudaRegion final : public SharedMemoryRegion {
 public:
  CudaRegion(std::string_view raw_handle, int device, uint64_t size) : device_(device), size_(size) {
    cudaIpcMemHandle_t handle;
    if (raw_handle.size() != sizeof handle)
      bad("raw_handle is " + std::to_string(raw_handle.size()) + " bytes, a cudaIpcMemHandle_t " +
          std::to_string(sizeof handle));
    std::memcpy(&handle, raw_handle.data(), sizeof handle);
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || device < 0 || device >= count) {
      cudaGetLastError();
      bad("device_id " + std::to_string(device) + " is not a GPU of this server (" + std::to_string(count) + ")");
    }
    DeviceScope scope(device_);
    void* p = nullptr;
    if (const cudaError_t err = cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess); err != cudaSuccess) {
      cudaGetLastError();
      bad("cannot open the CUDA IPC handle on cuda:" + std::to_string(device) + ": " + cudaGetErrorString(err) +
          " (a handle is opened by another process than its maker, on its device)");
    }
    data_ = static_cast<char*>(p);
    // Past the allocation's end a copy would fault, and a fault poisons every model on this GPU.
    if (const size_t room = bytes_to_allocation_end(p); room != 0 && room < size) {
      cudaIpcCloseMemHandle(p);
      bad("byte_size " + std::to_string(size) + " is more than the " + std::to_string(room) +
          " bytes of the allocation the handle names");
    }
    if (const cudaError_t err = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking); err != cudaSuccess) {
      cudaIpcCloseMemHandle(p);
      CONVOY_CUDA_CHECK(err);
    }
  }
  ~CudaRegion() override {  // unchecked: a destructor must not throw, and there is no one to tell
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    cudaSetDevice(device_);
    cudaStreamDestroy(stream_);
    cudaIpcCloseMemHandle(data_);
    if (previous >= 0) cudaSetDevice(previous);
    cudaGetLastError();
  }
  CudaRegion(const CudaRegion&) = delete;
  CudaRegion& operator=(const CudaRegion&) = delete;

  Device device() const override { return Device::cuda(device_); }
  char* data() const override { return data_; }
  uint64_t size() const override { return size_; }
  void to_host(void* host, const void* region, size_t bytes) const override {
    copy(host, region, bytes, cudaMemcpyDeviceToHost);
  }
  void from_host(void* region, const void* host, size_t bytes) const override {
    copy(region, host, bytes, cudaMemcpyHostToDevice);
  }
  void on_device(void* dst, const void* src, size_t bytes) const override {
    copy(dst, src, bytes, cudaMemcpyDeviceToDevice);
  }

 private:
  void copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) const {
    if (bytes == 0) return;
    DeviceScope scope(device_);
    CONVOY_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream_));
    CONVOY_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  int device_;
  uint64_t size_;
  char* data_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::shared_ptr<const SharedMemoryRegion> open_cuda_region(std::string_view raw_handle, int64_t device_id,
                                                           uint64_t byte_size) {
  if (device_id < 0 || device_id > 1024) bad("device_id " + std::to_string(device_id) + " is not a GPU's");
  return std::make_shared<CudaRegion>(raw_handle, static_cast<int>(device_id), byte_size);
}

}  // namespace convoy::serve
