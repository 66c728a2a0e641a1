#include "engine/backends/cuda/cuda_graph.h"

#include <cuda_runtime_api.h>

#include <string>
#include <utility>

#include "engine/backends/cuda/cudnn_cublas_check.h"
#include "engine/core/error.h"

namespace convoy::cuda {

namespace {

class CudaGraph final : public RecordedWork {
 public:
  CudaGraph(const CudaContext& ctx, std::shared_ptr<Allocator> tensors)
      : allocator_(ctx.allocator), stream_(ctx.stream), tensors_(std::move(tensors)) {}
  ~CudaGraph() override {
    // The pool's blocks go back to the shared lists; stream order keeps a replay still in
    // flight ahead of their next user's work.
    if (exec_) cudaGraphExecDestroy(exec_);
    allocator_->give_back(pool_);
  }

  void replay() override { CONVOY_CUDA_CHECK(cudaGraphLaunch(exec_, stream_)); }
  bool valid() const override { return allocator_->buffers_epoch() == epoch_; }

  void record(const std::function<void()>& work) {
    allocator_->set_capture_pool(&pool_);
    // Relaxed: an allocation that misses the caches may call cudaMalloc while recording.
    CONVOY_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
    cudaGraph_t graph = nullptr;
    try {
      work();
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph);
      if (graph) cudaGraphDestroy(graph);
      cudaGetLastError();
      allocator_->set_capture_pool(nullptr);
      throw;
    }
    const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
    allocator_->set_capture_pool(nullptr);
    if (end != cudaSuccess || !graph) {
      cudaGetLastError();
      if (graph) cudaGraphDestroy(graph);
      throw DeviceError(std::string("recording a CUDA graph failed: ") + cudaGetErrorString(end));
    }
    const cudaError_t inst = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    if (inst != cudaSuccess) {
      cudaGetLastError();
      exec_ = nullptr;
      throw DeviceError(std::string("instantiating a CUDA graph failed: ") + cudaGetErrorString(inst));
    }
    epoch_ = allocator_->buffers_epoch();
  }

 private:
  CudaAllocator* allocator_;
  cudaStream_t stream_;                 // owned by the allocator
  std::shared_ptr<Allocator> tensors_;  // the same allocator: keeps it (and the stream) alive
  CudaAllocator::Pool pool_;
  cudaGraphExec_t exec_ = nullptr;
  uint64_t epoch_ = 0;
};

}  // namespace

std::unique_ptr<RecordedWork> record_graph(CudaContext& ctx, std::shared_ptr<Allocator> tensors,
                                           const std::function<void()>& work) {
  auto graph = std::make_unique<CudaGraph>(ctx, std::move(tensors));
  graph->record(work);
  return graph;
}

}  // namespace convoy::cuda
