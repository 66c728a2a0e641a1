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
#include <string>

#include "engine/backends/cuda/cuda_ops.h"
#include "engine/core/tensor.h"

namespace convoy::cuda {

// 8-bit inference (issue 37): the tensors a quantized convolution reads and writes.
enum class QuantType : uint8_t { none, int8, fp8_e4m3 };
const char* quant_name(QuantType q);
// Why this GPU cannot run `q` ("" where it can): FP8 tensor cores need compute capability 8.9
// (Ada, Hopper) or newer; int8 convolutions need 6.1 (dp4a).
std::string quant_unsupported_reason(QuantType q, int major, int minor);

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
  // Quantized (dtype then unused): x, w, y and the residual are 8-bit, channels-last; the
  // convolution accumulates in int32 (int8) or f32 (fp8), and the epilogue runs in f32 as
  //   y = saturate(round(conv * scale + bias + residual * residual_scale)), ReLU before rounding,
  // scale and residual_scale per output channel (1, K, 1, 1) f32: w's channel scale times x's
  // scale over y's, and the residual's scale over y's (bias already over y's scale).
  QuantType quantized = QuantType::none;
  bool fused() const { return bias || residual || relu || quantized != QuantType::none; }
};

// The epilogue's buffers, where the spec has them.
struct GraphConvOperands {
  const void* bias = nullptr;
  const void* residual = nullptr;
  const void* scale = nullptr;           // quantized only
  const void* residual_scale = nullptr;  // quantized with a residual only
};

// How to pick among the engine configurations cuDNN's heuristics list.
struct GraphConvChoice {
  bool benchmark = false;      // time the first few on the live buffers, keep the fastest
  bool deterministic = false;  // only engines without cuDNN's non-determinism note
  size_t workspace_limit = 0;  // bytes
  // Also engines that compile their kernel at run time (NVRTC), at most this many per plan (0:
  // none): on cuDNN 9.14 every engine of a fused graph (convolution + bias/residual/ReLU) is one.
  // Building one takes 0.03 - 0.8 s on the H200 (cuDNN keeps what it compiled for the next
  // identical kernel).
  int runtime_compiled = 0;
};

class GraphConvPlan {
 public:
  ~GraphConvPlan();
  GraphConvPlan(const GraphConvPlan&) = delete;
  GraphConvPlan& operator=(const GraphConvPlan&) = delete;

  // The plan for `spec`, or null where cuDNN's graph API has none that builds within the
  // choice's limits (the caller falls back to the legacy calls). Engines that compile at run
  // time (NVRTC) only where the choice allows them. A graph built before in this process, on
  // this device and with this choice, gets the engine it settled on then, untimed.
  // Benchmarking reads and writes the buffers x, w, y (the written one may be a stand-in, where
  // the tensor must keep its values); `workspace` returns device scratch of at least the bytes
  // asked.
  static std::unique_ptr<GraphConvPlan> build(cudnnHandle_t handle, const GraphConvSpec& spec,
                                              const GraphConvChoice& choice, const void* x, const void* w,
                                              const void* y, const std::function<void*(size_t)>& workspace,
                                              const GraphConvOperands& epilogue = {});

  size_t workspace() const { return workspace_; }
  // Runs on the handle's stream; x, w, y as in GraphConvSpec (the written one among them too).
  void run(cudnnHandle_t handle, const void* x, const void* w, const void* y, void* workspace,
           const GraphConvOperands& epilogue = {});

 private:
  struct Descriptors;
  GraphConvPlan();
  std::unique_ptr<Descriptors> desc_;
  size_t workspace_ = 0;
};

}  // namespace convoy::cuda
