#pragma once
// A convolution (forward, data gradient or weight gradient) as an execution plan of cuDNN's
// graph API. The legacy calls (cudnnConvolutionForward and its algorithm list) reach only some
// of cuDNN's engines: on the H200, bf16 channels-last, the graph API's picks ran ResNet-50's
// 1x1 convolutions 2-4x faster at batch 256 and 5-30x faster at batch 1 (RESULTS.md). Used for
// reduced precision and TF32, not for exact f32.
// Internal to engine/backends/cuda.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>

#include "engine/backends/cuda/cuda_ops.h"
#include "engine/core/tensor.h"

namespace convoy::cuda {

// One convolution's geometry: x the layer's input (or dx), w its weights (or dw), y its output
// (or dy), each (N, C, H, W) / (K, C/groups, R, S) in its layout.
struct GraphConvSpec {
  ConvKind kind = ConvKind::forward;
  DType dtype = DType::bf16;
  std::array<int64_t, 4> x{}, w{}, y{};
  Layout x_layout = Layout::nchw, w_layout = Layout::nchw, y_layout = Layout::nchw;
  std::array<int64_t, 2> pad{}, stride{}, dilation{};
  bool accumulate = false;  // the written tensor += the result (beta = 1)
  // Forward only, in the same kernel (inference with batch norm folded in): y = conv + bias
  // (1, K, 1, 1) in f32, + residual (y's shape, dtype and layout), then a ReLU.
  bool bias = false, residual = false, relu = false;
  bool fused() const { return bias || residual || relu; }
};

// How to pick among the engine configurations cuDNN's heuristics list.
struct GraphConvChoice {
  bool benchmark = false;      // time the first few on the live buffers, keep the fastest
  bool deterministic = false;  // only engines without cuDNN's non-determinism note
  size_t workspace_limit = 0;  // bytes
  // Also engines that compile their kernel at run time (NVRTC): on cuDNN 9.14 every engine of a
  // fused graph (convolution + bias/residual/ReLU) is one. Building one takes 0.03 - 0.8 s on the
  // H200 (cuDNN keeps what it compiled for the next identical kernel), so at most
  // kRuntimeCompiledCandidates of them are built per plan.
  bool runtime_compilation = false;
};
inline constexpr int kRuntimeCompiledCandidates = 3;

class GraphConvPlan {
 public:
  ~GraphConvPlan();
  GraphConvPlan(const GraphConvPlan&) = delete;
  GraphConvPlan& operator=(const GraphConvPlan&) = delete;

  // The plan for `spec`, or null where cuDNN's graph API has none that builds within the
  // choice's limits (the caller falls back to the legacy calls). Engines that compile at run
  // time (NVRTC) only where the choice allows them. Benchmarking reads and writes the buffers x, w, y
  // (the written one may be a stand-in, where the tensor must keep its values); `workspace`
  // returns device scratch of at least the bytes asked.
  // `bias` and `residual`: the epilogue's buffers where the spec has them.
  static std::unique_ptr<GraphConvPlan> build(cudnnHandle_t handle, const GraphConvSpec& spec,
                                              const GraphConvChoice& choice, const void* x, const void* w,
                                              const void* y, const std::function<void*(size_t)>& workspace,
                                              const void* bias = nullptr, const void* residual = nullptr);

  size_t workspace() const { return workspace_; }
  // Runs on the handle's stream; x, w, y as in GraphConvSpec (the written one among them too).
  void run(cudnnHandle_t handle, const void* x, const void* w, const void* y, void* workspace,
           const void* bias = nullptr, const void* residual = nullptr);

 private:
  struct Descriptors;
  GraphConvPlan();
  std::unique_ptr<Descriptors> desc_;
  size_t workspace_ = 0;
};

}  // namespace convoy::cuda
