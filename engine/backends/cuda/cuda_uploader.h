#pragma once
// The CUDA BatchUploader (see backend.h): pinned host batches, copied on a stream of their own.
#include <memory>

#include "engine/backends/backend.h"
#include "engine/backends/cuda/cuda_allocator.h"

namespace convoy::cuda {

// `compute` is the backend's stream (a cudaStream_t), on which the uploaded batches are used.
std::unique_ptr<BatchUploader> make_cuda_batch_uploader(const std::shared_ptr<Allocator>& device_allocator,
                                                        int device_index, void* compute_stream);

}  // namespace convoy::cuda
