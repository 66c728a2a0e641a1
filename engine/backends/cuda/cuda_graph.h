#pragma once
// CUDA graphs: the work an op sequence queues on the backend's stream, recorded once and
// replayed with one launch (Backend::record).
#include <functional>
#include <memory>

#include "engine/backends/backend.h"
#include "engine/backends/cuda/cuda_context.h"

namespace convoy::cuda {

// Records `work` on ctx.stream. The blocks `work` frees while recording stay with the graph
// (CudaAllocator's capture pool) until it is destroyed; `tensors` (ctx's allocator) is kept
// alive as long. Throws DeviceError when the work cannot be recorded (it waited for the device,
// say), with the stream left usable.
std::unique_ptr<RecordedWork> record_graph(CudaContext& ctx, std::shared_ptr<Allocator> tensors,
                                           const std::function<void()>& work);

}  // namespace convoy::cuda
