#pragma once
// A caching device allocator: size-bucketed free lists, stream-ordered on the backend's
// one stream, so steady-state training calls cudaMalloc never. It owns that stream
// (tensors keep the allocator alive, so the stream outlives every tensor that uses it).
// No CUDA header here: tests include this to read the counters.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "engine/core/tensor.h"

namespace convoy::cuda {

struct AllocatorStats {
  uint64_t cuda_mallocs = 0;     // calls of cudaMalloc so far
  uint64_t cache_hits = 0;       // allocations served from the free lists
  size_t bytes_in_use = 0;       // bucket bytes handed out and not yet returned
  size_t bytes_cached = 0;       // bucket bytes in the free lists
  size_t peak_bytes_in_use = 0;
};

class CudaAllocator final : public Allocator {
 public:
  // Creates the stream on `device_index`; throws DeviceError when that fails.
  explicit CudaAllocator(int device_index);
  ~CudaAllocator() override;  // synchronizes, frees every cached block, destroys the stream
  CudaAllocator(const CudaAllocator&) = delete;
  CudaAllocator& operator=(const CudaAllocator&) = delete;

  Device device() const override { return Device::cuda(device_index_); }
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  // Stream-ordered: queued work finishes before the copy, and the host buffer is ready
  // when this returns.
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, size_t bytes) override;
  void copy_on_device(void* dst, const void* src, size_t bytes) override;
  void fill_zero(void* ptr, size_t bytes) override;

  int device_index() const { return device_index_; }
  void* stream() const { return stream_; }  // a cudaStream_t
  AllocatorStats stats() const;
  // Returns every cached block to the driver (after the stream drains).
  void release_cached();

  // The bucket a request of `bytes` is served from (exposed for tests).
  static size_t bucket_size(size_t bytes);

  // CUDA-graph recording: while a pool is set, blocks freed go to it instead of the shared free
  // lists and allocations draw from it first; a block handed out while recording belongs to the
  // pool, and goes back to it when freed later (a layer's saved tensor, replaced by a plain
  // forward between replays). So the memory a recorded graph replays into is never handed to
  // anyone else while the graph lives. give_back() returns a pool's blocks to the shared lists.
  using Pool = std::map<size_t, std::vector<void*>>;
  void set_capture_pool(Pool* pool);
  void give_back(Pool& pool);
  // Moves on whenever a long-lived buffer (ScratchBuffer) is reallocated and its old block
  // freed: graphs recorded before then point at memory they no longer own.
  uint64_t buffers_epoch() const;
  void note_buffer_moved();

 private:
  void release_cached_locked();

  int device_index_ = 0;
  void* stream_ = nullptr;
  mutable std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_;       // bucket size -> blocks
  std::unordered_map<void*, size_t> live_;           // block -> bucket size
  Pool* capture_pool_ = nullptr;                     // set_capture_pool
  std::unordered_map<void*, Pool*> pool_owned_;      // blocks handed out while recording, by pool
  uint64_t buffers_epoch_ = 0;
  AllocatorStats stats_;
};

}  // namespace convoy::cuda
