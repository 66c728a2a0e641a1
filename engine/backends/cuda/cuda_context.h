#pragma once
// What every CUDA op needs: the device, the backend's one stream, the library handles and
// the allocator. Owned by the backend and passed down; nothing here is global.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <memory>

#include "engine/backends/cuda/cuda_allocator.h"
#include "engine/core/engine_options.h"

namespace convoy::cuda {

struct CudaContext {
  int device = 0;
  cudaStream_t stream = nullptr;   // owned by the allocator
  cudnnHandle_t cudnn = nullptr;   // bound to `stream`
  cublasHandle_t cublas = nullptr; // bound to `stream`; TF32 math only where `tf32`
  CudaAllocator* allocator = nullptr;
  std::shared_ptr<Allocator> tensors;  // the same allocator, for tensors the ops make themselves
  bool deterministic = false;
  bool benchmark = true;  // BackendOptions::benchmark
  bool tf32 = false;      // BackendOptions::tf32
  CudaTunables tunables;  // BackendOptions::cuda
  int sm_count = 0;
};

// A device buffer that only grows, reused across calls (stream order keeps reuse safe).
class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() { reset(); }
  void bind(CudaAllocator* allocator) { allocator_ = allocator; }
  // At least `bytes` of device memory (nullptr when bytes == 0).
  void* get(size_t bytes) {
    if (bytes == 0) return ptr_;
    if (bytes > size_) {
      if (ptr_) allocator_->note_buffer_moved();  // recorded graphs may still point at the old block
      reset();
      ptr_ = allocator_->allocate(bytes);
      size_ = bytes;
    }
    return ptr_;
  }
  void reset() {
    if (ptr_) allocator_->deallocate(ptr_, size_);
    ptr_ = nullptr;
    size_ = 0;
  }

 private:
  CudaAllocator* allocator_ = nullptr;
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace convoy::cuda
