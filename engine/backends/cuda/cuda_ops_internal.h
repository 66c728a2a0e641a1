#pragma once
// What the CudaOps source files (cuda_<family>.cpp) share: the dtype mapping to the kernels,
// cuDNN and cuBLAS, the (outer, C, inner) channel view, and the cuDNN descriptors.
// Internal to engine/backends/cuda.
#include <cublas_v2.h>
#include <cudnn.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/backends/cuda/cudnn_cublas_check.h"
#include "engine/backends/cuda/cudnn_graph_conv.h"
#include "engine/core/tensor.h"
#include "kernels/dt.cuh"

namespace convoy::cuda {

using kernels::Dt;

static_assert(static_cast<int>(DType::f32) == static_cast<int>(Dt::f32) &&
              static_cast<int>(DType::bf16) == static_cast<int>(Dt::bf16) &&
              static_cast<int>(DType::f16) == static_cast<int>(Dt::f16) &&
              static_cast<int>(DType::i32) == static_cast<int>(Dt::i32) &&
              static_cast<int>(DType::u8) == static_cast<int>(Dt::u8),
              "kernels::Dt must mirror convoy::DType");

inline Dt dt_of(DType d) { return static_cast<Dt>(static_cast<int>(d)); }

// cuDNN and cuBLAS take int sizes; a larger tensor is refused rather than truncated.
inline int to_int(int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX)
    throw InternalError(std::string(what) + " " + std::to_string(v) + " does not fit cuDNN/cuBLAS's int");
  return static_cast<int>(v);
}

struct Dims4 {
  int64_t n, c, h, w;
};

// The (outer, C, inner) view in memory: nchw (N, C, H*W), nhwc (N*H*W, C, 1).
struct ChannelView {
  int64_t outer, channels, inner;
};
inline ChannelView channel_view(const Tensor& t) {
  if (t.ndim() < 2) return {1, t.numel(), 1};
  if (t.layout() == Layout::nhwc) return {t.dim(0) * t.dim(2) * t.dim(3), t.dim(1), 1};
  int64_t inner = 1;
  for (int i = 2; i < t.ndim(); ++i) inner *= t.dim(i);
  return {t.dim(0), t.dim(1), inner};
}

// The switches below name every enumerator and have no default, so that -Werror=switch
// makes a new DType or Layout a build error here instead of a silent wrong mapping.

inline cudnnDataType_t cudnn_type(DType d) {
  switch (d) {
    case DType::f32: return CUDNN_DATA_FLOAT;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    case DType::f16: return CUDNN_DATA_HALF;
    case DType::i32:
    case DType::u8: break;  // no op hands these to cuDNN: supports() refuses them first
  }
  throw InternalError("cuDNN: unsupported dtype " + std::string(dtype_name(d)));
}

inline cudaDataType_t cublas_type(DType d) {
  switch (d) {
    case DType::f32: return CUDA_R_32F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    case DType::i32:
    case DType::u8: break;  // no op hands these to cuBLAS: supports() refuses them first
  }
  throw InternalError("cuBLAS: unsupported dtype " + std::string(dtype_name(d)));
}

inline cudnnTensorFormat_t cudnn_format(Layout l) {
  switch (l) {
    case Layout::nchw: return CUDNN_TENSOR_NCHW;
    case Layout::nhwc: return CUDNN_TENSOR_NHWC;
  }
  throw InternalError("cuDNN: unknown layout " + std::to_string(static_cast<int>(l)));
}

struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc() { CONVOY_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d)); }
  ~TensorDesc() { if (d) cudnnDestroyTensorDescriptor(d); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  void set(const Dims4& s, DType dtype, Layout layout) {
    CONVOY_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, cudnn_format(layout), cudnn_type(dtype),
                                                  to_int(s.n, "N"), to_int(s.c, "C"),
                                                  to_int(s.h, "H"), to_int(s.w, "W")));
  }
};

struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc() { CONVOY_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d)); }
  ~FilterDesc() { if (d) cudnnDestroyFilterDescriptor(d); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
};

struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc() { CONVOY_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d)); }
  ~ConvDesc() { if (d) cudnnDestroyConvolutionDescriptor(d); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
};

// cuDNN descriptors and the algorithm chosen once for one convolution shape (cuda_conv.cpp).
struct ConvPlan {
  TensorDesc x, y;  // x: the layer's input (or dx), y: its output (or dy)
  FilterDesc w;
  ConvDesc conv;
  int algo = 0;
  size_t workspace = 0;
  bool exact = false;  // f32 without TF32: FMA math, no transform-based algorithms
  // The graph API's plan where there is one (reduced precision), else the legacy `algo` runs.
  std::unique_ptr<GraphConvPlan> graph;
};

// The alpha and beta of cuDNN and cuBLAS calls: overwrite the output.
inline constexpr float kOne = 1.f, kZero = 0.f;

// The most workspace a convolution's plan may ask for: 1 GiB, or half the GPU's free memory.
inline size_t workspace_limit() {
  size_t limit = size_t(1) << 30;
  if (size_t free_b = 0, total_b = 0; cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
    limit = std::min(limit, free_b / 2);
  return limit;
}

}  // namespace convoy::cuda
