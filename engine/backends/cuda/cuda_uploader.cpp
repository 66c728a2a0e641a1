#include "engine/backends/cuda/cuda_uploader.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "engine/backends/cuda/cudnn_cublas_check.h"
#include "engine/core/error.h"

namespace convoy::cuda {

namespace {

// Page-locked host memory, so copies to the device run asynchronously at full speed. Blocks
// are cached by size: cudaFreeHost synchronizes the whole device, which a training step must
// never wait for. Tensors keep this alive, so it outlives every batch that uses it.
class PinnedAllocator final : public Allocator {
 public:
  explicit PinnedAllocator(int device_index) : device_index_(device_index) {}
  ~PinnedAllocator() override {
    for (auto& [size, blocks] : free_)
      for (void* p : blocks) cudaFreeHost(p);
  }
  Device device() const override { return Device::cpu(); }
  void* allocate(size_t bytes) override {
    {
      std::lock_guard lock(mutex_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        return p;
      }
    }
    CONVOY_CUDA_CHECK(cudaSetDevice(device_index_));
    void* p = nullptr;
    CONVOY_CUDA_CHECK(cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocDefault));
    return p;
  }
  void deallocate(void* ptr, size_t bytes) override {
    std::lock_guard lock(mutex_);
    free_[bytes].push_back(ptr);
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_from_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_on_device(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void fill_zero(void* ptr, size_t bytes) override { std::memset(ptr, 0, bytes); }

 private:
  int device_index_;
  std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_;
};

// Call k copies into slot k % kSlots on the copy stream. Before it reuses a slot, the copy
// stream waits for the compute stream's tail as it was two calls earlier (one training step
// of images and labels ago), which covers the step that read the slot's previous batch and
// nothing later: so the copy of step i's batch overlaps step i - 1.
class CudaBatchUploader final : public BatchUploader {
 public:
  CudaBatchUploader(std::shared_ptr<Allocator> device_allocator, int device_index, cudaStream_t compute)
      : device_allocator_(std::move(device_allocator)), pinned_(std::make_shared<PinnedAllocator>(device_index)),
        device_index_(device_index), compute_(compute) {
    CONVOY_CUDA_CHECK(cudaSetDevice(device_index_));
    CONVOY_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
    for (cudaEvent_t& e : copied_) CONVOY_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    for (cudaEvent_t& e : compute_tail_) CONVOY_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  ~CudaBatchUploader() override {
    cudaSetDevice(device_index_);
    cudaStreamSynchronize(copy_);
    for (cudaEvent_t e : copied_) cudaEventDestroy(e);
    for (cudaEvent_t e : compute_tail_) cudaEventDestroy(e);
    cudaStreamDestroy(copy_);
  }

  Tensor host_empty(Shape shape, DType dtype) override { return Tensor(std::move(shape), dtype, pinned_); }

  Tensor upload(const Tensor& host) override {
    CONVOY_CUDA_CHECK(cudaSetDevice(device_index_));
    const size_t slot = static_cast<size_t>(calls_ % kSlots);
    const size_t tail = static_cast<size_t>(calls_ % 2);
    // The CPU may only drop the slot's previous host batch once its copy is done.
    if (host_[slot].defined()) CONVOY_CUDA_CHECK(cudaEventSynchronize(copied_[slot]));
    if (calls_ >= 2) CONVOY_CUDA_CHECK(cudaStreamWaitEvent(copy_, compute_tail_[tail], 0));
    CONVOY_CUDA_CHECK(cudaEventRecord(compute_tail_[tail], compute_));
    Tensor& buffer = device_[slot];
    Tensor out;
    if (buffer.defined() && buffer.dtype() == host.dtype() && host.ndim() >= 1 && buffer.ndim() == host.ndim() &&
        buffer.dim(0) >= host.dim(0) &&
        std::equal(host.shape().begin() + 1, host.shape().end(), buffer.shape().begin() + 1)) {
      out = buffer.slice_rows(0, host.dim(0));
    } else {
      // A new block comes from the compute stream's order: let the copy wait for everything queued there.
      buffer = Tensor(host.shape(), host.dtype(), device_allocator_);
      CONVOY_CUDA_CHECK(cudaEventRecord(compute_tail_[tail], compute_));
      CONVOY_CUDA_CHECK(cudaStreamWaitEvent(copy_, compute_tail_[tail], 0));
      out = buffer;
    }
    // A batch decoded on this GPU (nvJPEG) comes as a device tensor: copied into the ring like a
    // host one, so that its decoder may reuse the memory once the copy is done.
    CONVOY_CHECK(host.device().is_cpu() || host.device() == Device::cuda(device_index_),
                 "BatchUploader::upload takes host tensors or this GPU's");
    const Tensor& src = host;
    CONVOY_CUDA_CHECK(cudaMemcpyAsync(out.raw(), src.raw(), src.nbytes(), cudaMemcpyDefault, copy_));
    CONVOY_CUDA_CHECK(cudaEventRecord(copied_[slot], copy_));
    CONVOY_CUDA_CHECK(cudaStreamWaitEvent(compute_, copied_[slot], 0));
    host_[slot] = src;
    ++calls_;
    return out;
  }

  std::unique_ptr<Download> download(const Tensor& device, Tensor& host) override {
    CONVOY_CHECK(device.device() == Device::cuda(device_index_) && host.device().is_cpu() &&
                     device.nbytes() == host.nbytes(),
                 "BatchUploader::download: a tensor of this GPU into host memory of its size");
    CONVOY_CUDA_CHECK(cudaSetDevice(device_index_));
    auto landed = std::make_unique<Landed>(host);
    CONVOY_CUDA_CHECK(cudaMemcpyAsync(host.raw(), device.raw(), device.nbytes(), cudaMemcpyDeviceToHost, compute_));
    CONVOY_CUDA_CHECK(cudaEventRecord(landed->event, compute_));
    return landed;
  }

 private:
  // An event behind the copy; the host tensor is kept until then (a pinned block freed sooner could
  // be handed out again while the copy still writes into it).
  struct Landed final : Download {
    explicit Landed(Tensor host) : host(std::move(host)) {
      CONVOY_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    }
    ~Landed() override {
      cudaEventSynchronize(event);
      cudaEventDestroy(event);
    }
    void wait() override { CONVOY_CUDA_CHECK(cudaEventSynchronize(event)); }
    Tensor host;
    cudaEvent_t event = nullptr;
  };

  std::shared_ptr<Allocator> device_allocator_;
  std::shared_ptr<Allocator> pinned_;
  int device_index_;
  cudaStream_t compute_;
  cudaStream_t copy_ = nullptr;
  std::array<cudaEvent_t, kSlots> copied_{};
  std::array<cudaEvent_t, 2> compute_tail_{};
  std::array<Tensor, kSlots> device_;  // the ring of device buffers
  std::array<Tensor, kSlots> host_;    // the host batches being copied from
  int64_t calls_ = 0;
};

}  // namespace

std::unique_ptr<BatchUploader> make_cuda_batch_uploader(const std::shared_ptr<Allocator>& device_allocator,
                                                        int device_index, void* compute_stream) {
  return std::make_unique<CudaBatchUploader>(device_allocator, device_index, static_cast<cudaStream_t>(compute_stream));
}

}  // namespace convoy::cuda
