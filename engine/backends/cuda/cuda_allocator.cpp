#include "engine/backends/cuda/cuda_allocator.h"

#include <algorithm>
#include <string>

#include "engine/backends/cuda/cudnn_cublas_check.h"

namespace convoy::cuda {

namespace {
cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
constexpr size_t kSmall = size_t(1) << 20;  // below: 512-byte steps; above: quarter-octave steps
}  // namespace

size_t CudaAllocator::bucket_size(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes <= kSmall) return (bytes + 511) / 512 * 512;
  // Four buckets per power of two: at most 25% waste, few distinct sizes.
  size_t top = size_t(1) << (63 - __builtin_clzll(static_cast<unsigned long long>(bytes)));
  if (top == bytes) return bytes;
  const size_t step = top / 4;
  return (bytes + step - 1) / step * step;
}

CudaAllocator::CudaAllocator(int device_index) : device_index_(device_index) {
  CONVOY_CUDA_CHECK(cudaSetDevice(device_index_));
  cudaStream_t s = nullptr;
  CONVOY_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream_ = s;
}

CudaAllocator::~CudaAllocator() {
  // No throwing from a destructor: errors here only leak memory the process frees anyway.
  cudaSetDevice(device_index_);
  cudaStreamSynchronize(as_stream(stream_));
  std::lock_guard lock(mutex_);
  for (auto& [size, blocks] : free_)
    for (void* p : blocks) cudaFree(p);
  free_.clear();
  for (auto& [p, size] : live_) cudaFree(p);  // none should be left: tensors hold us alive
  live_.clear();
  cudaStreamDestroy(as_stream(stream_));
}

void* CudaAllocator::allocate(size_t bytes) {
  const size_t size = bucket_size(bytes);
  std::lock_guard lock(mutex_);
  void* p = nullptr;
  if (capture_pool_) {
    auto pit = capture_pool_->find(size);
    if (pit != capture_pool_->end() && !pit->second.empty()) {
      p = pit->second.back();
      pit->second.pop_back();
      live_.emplace(p, size);
      pool_owned_[p] = capture_pool_;
      stats_.bytes_in_use += size;
      ++stats_.cache_hits;
      return p;
    }
  }
  auto it = free_.find(size);
  if (it != free_.end() && !it->second.empty()) {
    // Stream order makes reuse safe: every earlier use of the block was queued on our
    // stream before any use by the new owner.
    p = it->second.back();
    it->second.pop_back();
    stats_.bytes_cached -= size;
    ++stats_.cache_hits;
  } else {
    CONVOY_CUDA_CHECK(cudaSetDevice(device_index_));
    cudaError_t err = cudaMalloc(&p, size);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the sticky-free error state of the failed call
      release_cached_locked();
      err = cudaMalloc(&p, size);
    }
    if (err != cudaSuccess) {
      cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      throw OutOfMemoryError("cuda:" + std::to_string(device_index_) + ": out of memory allocating " +
                        std::to_string(size) + " bytes (" + cudaGetErrorString(err) + "; " +
                        std::to_string(stats_.bytes_in_use >> 20) + " MiB in use by Convoy, " +
                        std::to_string(free_b >> 20) + " of " + std::to_string(total_b >> 20) +
                        " MiB free on the device)");
    }
    ++stats_.cuda_mallocs;
  }
  live_.emplace(p, size);
  if (capture_pool_) pool_owned_[p] = capture_pool_;
  stats_.bytes_in_use += size;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  return p;
}

void CudaAllocator::deallocate(void* ptr, size_t bytes) {
  if (!ptr) return;
  std::lock_guard lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return;  // not ours: never free what we did not hand out
  const size_t size = it->second;
  live_.erase(it);
  stats_.bytes_in_use -= size;
  if (auto owner = pool_owned_.find(ptr); owner != pool_owned_.end()) {
    (*owner->second)[size].push_back(ptr);  // a recorded graph still replays into it
    pool_owned_.erase(owner);
    return;
  }
  if (capture_pool_) {
    (*capture_pool_)[size].push_back(ptr);
    return;
  }
  free_[size].push_back(ptr);
  stats_.bytes_cached += size;
}

void CudaAllocator::set_capture_pool(Pool* pool) {
  std::lock_guard lock(mutex_);
  capture_pool_ = pool;
}

void CudaAllocator::give_back(Pool& pool) {
  std::lock_guard lock(mutex_);
  // Blocks of the pool still held (a layer's saved tensor) become ordinary ones.
  std::erase_if(pool_owned_, [&](const auto& entry) { return entry.second == &pool; });
  for (auto& [size, blocks] : pool) {
    for (void* p : blocks) free_[size].push_back(p);
    stats_.bytes_cached += size * blocks.size();
  }
  pool.clear();
}

uint64_t CudaAllocator::buffers_epoch() const {
  std::lock_guard lock(mutex_);
  return buffers_epoch_;
}

void CudaAllocator::note_buffer_moved() {
  std::lock_guard lock(mutex_);
  ++buffers_epoch_;
}

void CudaAllocator::release_cached_locked() {
  cudaStreamSynchronize(as_stream(stream_));
  for (auto& [size, blocks] : free_) {
    for (void* p : blocks) cudaFree(p);
    stats_.bytes_cached -= size * blocks.size();
  }
  free_.clear();
}

void CudaAllocator::release_cached() {
  std::lock_guard lock(mutex_);
  CONVOY_CUDA_CHECK(cudaSetDevice(device_index_));
  release_cached_locked();
}

AllocatorStats CudaAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CudaAllocator::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  CONVOY_CUDA_CHECK(cudaSetDevice(device_index_));
  CONVOY_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, as_stream(stream_)));
  CONVOY_CUDA_CHECK(cudaStreamSynchronize(as_stream(stream_)));
}

void CudaAllocator::copy_from_host(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  CONVOY_CUDA_CHECK(cudaSetDevice(device_index_));
  // From pageable memory the runtime stages the source before returning, so the caller
  // may free it at once; the device-side write stays ordered on the stream.
  CONVOY_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, as_stream(stream_)));
}

void CudaAllocator::copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  CONVOY_CUDA_CHECK(cudaSetDevice(device_index_));
  CONVOY_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, as_stream(stream_)));
}

void CudaAllocator::fill_zero(void* ptr, size_t bytes) {
  if (bytes == 0) return;
  CONVOY_CUDA_CHECK(cudaSetDevice(device_index_));
  CONVOY_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, as_stream(stream_)));
}

}  // namespace convoy::cuda
