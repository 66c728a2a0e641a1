#pragma once
// The CUDA backend's 8-bit inference plan (Backend::compile_8bit). Internal to engine/backends/cuda.
#include <cstdint>
#include <memory>

#include "engine/backends/cuda/cuda_context.h"
#include "engine/backends/cuda/cudnn_graph_conv.h"
#include "engine/backends/eight_bit.h"

namespace convoy::cuda {

class CudaOps;

// cuDNN's tensor type for an 8-bit type.
inline QuantType quant_type(EightBitType t) { return t == EightBitType::int8 ? QuantType::int8 : QuantType::fp8_e4m3; }

// `graph` at `batch` images a pass on the context's device and stream; bf16 steps run through
// `ops`. Both (the backend's) must outlive the result. Plans are built and timed here.
std::unique_ptr<CompiledForward> compile_eight_bit(const CudaContext& ctx, CudaOps& ops, const EightBitGraph& graph,
                                                   int64_t batch);

}  // namespace convoy::cuda
