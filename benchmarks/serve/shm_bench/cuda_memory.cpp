// convoy_shm_bench --cuda: the client's inputs and outputs in its own device memory, which the server
// opens from a cudaIpcMemHandle_t (Triton's CUDA shared-memory extension).
#include <cuda_runtime_api.h>

#include <stdexcept>

#include "benchmarks/serve/shm_bench/shm_bench.h"

namespace convoy::shm_bench {

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

class CudaMemory final : public ClientMemory {
 public:
  CudaMemory(int device, size_t bytes) : device_(device), bytes_(bytes) {
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaMalloc(&data_, bytes), "cudaMalloc");
    cudaIpcMemHandle_t handle;
    check(cudaIpcGetMemHandle(&handle, data_), "cudaIpcGetMemHandle");
    handle_.assign(reinterpret_cast<const char*>(&handle), sizeof handle);
  }
  ~CudaMemory() override {
    cudaSetDevice(device_);
    cudaFree(data_);
  }
  size_t size() const override { return bytes_; }
  void write(size_t offset, const void* data, size_t bytes) override {
    check(cudaSetDevice(device_), "cudaSetDevice");
    check(cudaMemcpy(static_cast<char*>(data_) + offset, data, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  void read(size_t offset, void* data, size_t bytes) const override {
    check(cudaSetDevice(device_), "cudaSetDevice");
    check(cudaMemcpy(data, static_cast<const char*>(data_) + offset, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  }
  std::string key() const override { return ""; }
  int device() const override { return device_; }
  std::string ipc_handle() const override { return handle_; }

 private:
  int device_;
  size_t bytes_;
  void* data_ = nullptr;
  std::string handle_;
};

}  // namespace

std::unique_ptr<ClientMemory> make_cuda_memory(int device, size_t bytes) {
  return std::make_unique<CudaMemory>(device, bytes);
}

}  // namespace convoy::shm_bench
