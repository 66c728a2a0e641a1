// CudaOps convolutions: cuDNN, with an algorithm chosen once per shape (ConvPlan).
#include "engine/backends/cuda/cuda_ops.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/backends/cuda/cudnn_cublas_check.h"
#include "engine/backends/cuda/cuda_ops_internal.h"
#include "engine/backends/cuda/cudnn_algo_pick.h"
#include "kernels/bias.cuh"
#include "kernels/elementwise.cuh"
#include "kernels/im2col.cuh"

namespace convoy::cuda {

namespace {

// The device buffers of one convolution, named as in ConvPlan: x the input (or dx), w the
// weights (or dw), y the output (or dy).
struct ConvBuffers {
  const void* x;
  const void* w;
  const void* y;
};

const char* conv_op_name(ConvKind kind) {
  switch (kind) {
    case ConvKind::forward: return "conv2d_forward";
    case ConvKind::backward_data: return "conv2d_backward_data";
    case ConvKind::backward_filter: return "conv2d_backward_weights";
  }
  return "conv2d";
}


// The cuDNN entry points that differ between the three convolutions, in one place: the
// algorithm search below is the same for all three. Each passes the plan's descriptors in
// its own argument order; find() benchmarks on the live buffers and overwrites the one the
// convolution writes (y, dx or dw).
struct ForwardCalls {
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  using Algo = cudnnConvolutionFwdAlgo_t;
  static int max_count(cudnnHandle_t hd) {
    int count = 0;
    CONVOY_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(hd, &count));
    return count;
  }
  static int heuristics(cudnnHandle_t hd, const ConvPlan& p, std::vector<Perf>& perf) {
    int got = 0;
    CONVOY_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(hd, p.x.d, p.w.d, p.conv.d, p.y.d,
                                                              static_cast<int>(perf.size()), &got, perf.data()));
    return got;
  }
  static cudnnStatus_t find(cudnnHandle_t hd, const ConvPlan& p, const ConvBuffers& b, std::vector<Perf>& perf,
                            int* found, void* ws, size_t ws_bytes) {
    return cudnnFindConvolutionForwardAlgorithmEx(hd, p.x.d, b.x, p.w.d, b.w, p.conv.d, p.y.d, const_cast<void*>(b.y),
                                                  static_cast<int>(perf.size()), found, perf.data(), ws, ws_bytes);
  }
  static size_t workspace(cudnnHandle_t hd, const ConvPlan& p, Algo algo) {
    size_t bytes = 0;
    CONVOY_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(hd, p.x.d, p.w.d, p.conv.d, p.y.d, algo, &bytes));
    return bytes;
  }
};

struct BackwardDataCalls {
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  using Algo = cudnnConvolutionBwdDataAlgo_t;
  static int max_count(cudnnHandle_t hd) {
    int count = 0;
    CONVOY_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(hd, &count));
    return count;
  }
  static int heuristics(cudnnHandle_t hd, const ConvPlan& p, std::vector<Perf>& perf) {
    int got = 0;
    CONVOY_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(hd, p.w.d, p.y.d, p.conv.d, p.x.d,
                                                                   static_cast<int>(perf.size()), &got, perf.data()));
    return got;
  }
  static cudnnStatus_t find(cudnnHandle_t hd, const ConvPlan& p, const ConvBuffers& b, std::vector<Perf>& perf,
                            int* found, void* ws, size_t ws_bytes) {
    return cudnnFindConvolutionBackwardDataAlgorithmEx(hd, p.w.d, b.w, p.y.d, b.y, p.conv.d, p.x.d,
                                                       const_cast<void*>(b.x), static_cast<int>(perf.size()), found,
                                                       perf.data(), ws, ws_bytes);
  }
  static size_t workspace(cudnnHandle_t hd, const ConvPlan& p, Algo algo) {
    size_t bytes = 0;
    CONVOY_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(hd, p.w.d, p.y.d, p.conv.d, p.x.d, algo, &bytes));
    return bytes;
  }
};

struct BackwardFilterCalls {
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  using Algo = cudnnConvolutionBwdFilterAlgo_t;
  static int max_count(cudnnHandle_t hd) {
    int count = 0;
    CONVOY_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(hd, &count));
    return count;
  }
  static int heuristics(cudnnHandle_t hd, const ConvPlan& p, std::vector<Perf>& perf) {
    int got = 0;
    CONVOY_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(hd, p.x.d, p.y.d, p.conv.d, p.w.d,
                                                                     static_cast<int>(perf.size()), &got, perf.data()));
    return got;
  }
  static cudnnStatus_t find(cudnnHandle_t hd, const ConvPlan& p, const ConvBuffers& b, std::vector<Perf>& perf,
                            int* found, void* ws, size_t ws_bytes) {
    return cudnnFindConvolutionBackwardFilterAlgorithmEx(hd, p.x.d, b.x, p.y.d, b.y, p.conv.d, p.w.d,
                                                         const_cast<void*>(b.w), static_cast<int>(perf.size()), found,
                                                         perf.data(), ws, ws_bytes);
  }
  static size_t workspace(cudnnHandle_t hd, const ConvPlan& p, Algo algo) {
    size_t bytes = 0;
    CONVOY_CUDNN_CHECK(
        cudnnGetConvolutionBackwardFilterWorkspaceSize(hd, p.x.d, p.y.d, p.conv.d, p.w.d, algo, &bytes));
    return bytes;
  }
};

// Sets plan.algo, its math type and workspace size: benchmarked on the live buffers when
// `benchmark` (within the largest workspace the heuristics' usable picks ask for), else, or
// when benchmarking finds nothing usable, the heuristics' first usable pick. False if none.
template <class Calls>
bool choose_algorithm(cudnnHandle_t hd, ConvPlan& plan, const ConvBuffers& buffers, ScratchBuffer& workspace,
                      bool benchmark, bool deterministic, size_t limit) {
  const int max_count = Calls::max_count(hd);
  std::vector<typename Calls::Perf> heur(max_count), found(max_count);
  const int got = Calls::heuristics(hd, plan, heur);
  size_t ws = 0;
  for (int i = 0; i < got; ++i)
    if (heur[i].status == CUDNN_STATUS_SUCCESS && heur[i].memory <= limit) ws = std::max(ws, heur[i].memory);
  int nfound = 0;
  const cudnnStatus_t st =
      !benchmark ? CUDNN_STATUS_NOT_SUPPORTED : Calls::find(hd, plan, buffers, found, &nfound, workspace.get(ws), ws);
  const typename Calls::Perf* best = nullptr;
  // Exact f32 first looks for an exact algorithm (see transform_based), then takes any.
  for (const bool exact : {plan.exact, false}) {
    if (st == CUDNN_STATUS_SUCCESS) best = pick_algo(found, nfound, deterministic, ws, exact);
    if (!best) best = pick_algo(heur, got, deterministic, limit, exact);
    if (best) break;
  }
  if (!best) return false;
  plan.algo = best->algo;
  CONVOY_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv.d, plan.exact ? CUDNN_FMA_MATH : best->mathType));
  plan.workspace = Calls::workspace(hd, plan, best->algo);
  return true;
}

// The graph API's description of a convolution of x, w and y (as the op checked them).
GraphConvSpec graph_conv_spec(ConvKind kind, const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& y) {
  GraphConvSpec spec;
  spec.kind = kind;
  spec.dtype = x.dtype();
  spec.x = {x.dim(0), x.dim(1), x.dim(2), x.dim(3)};
  spec.w = {w.dim(0), w.dim(1), w.dim(2), w.dim(3)};
  spec.y = {y.dim(0), y.dim(1), y.dim(2), y.dim(3)};
  spec.x_layout = x.layout();
  spec.w_layout = w.layout();
  spec.y_layout = y.layout();
  spec.pad = {p.pad_h, p.pad_w};
  spec.stride = {p.stride_h, p.stride_w};
  spec.dilation = {p.dilation_h, p.dilation_w};
  return spec;
}

}  // namespace

ConvPlan& CudaOps::conv_plan(ConvKind kind, const Conv2dParams& p, const Tensor& x, const Tensor& w,
                             const Tensor& y, bool keep_written) {
  // The op checked the geometry (check_conv2d_*): y is conv2d_output_shape(x, w).
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const int64_t k = w.dim(0), cg = w.dim(1), r = w.dim(2), s = w.dim(3);
  const int64_t pp = y.dim(2), qq = y.dim(3);
  const int64_t g = p.groups;
  // An accumulating data gradient (beta = 1): the graph API bakes beta into the plan, so it is
  // a plan of its own.
  const bool accumulate = kind == ConvKind::backward_data && keep_written;

  const std::array<int64_t, 24> key = {
      static_cast<int64_t>(kind), static_cast<int64_t>(x.dtype()), static_cast<int64_t>(x.layout()),
      static_cast<int64_t>(w.layout()), static_cast<int64_t>(y.layout()), n, c, h, wd, k, cg, r, s,
      pp, qq, p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dilation_h, p.dilation_w, g, accumulate, 0};
  if (auto it = conv_plans_.find(key); it != conv_plans_.end()) return *it->second;

  auto plan = std::make_unique<ConvPlan>();
  const DType dtype = x.dtype();
  plan->x.set({n, c, h, wd}, dtype, x.layout());
  plan->y.set({n, k, pp, qq}, dtype, y.layout());
  CONVOY_CUDNN_CHECK(cudnnSetFilter4dDescriptor(plan->w.d, cudnn_type(dtype), cudnn_format(w.layout()),
                                                to_int(k, "K"), to_int(cg, "C/groups"),
                                                to_int(r, "R"), to_int(s, "S")));
  CONVOY_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
      plan->conv.d, to_int(p.pad_h, "pad"), to_int(p.pad_w, "pad"), to_int(p.stride_h, "stride"),
      to_int(p.stride_w, "stride"), to_int(p.dilation_h, "dilation"),
      to_int(p.dilation_w, "dilation"), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CONVOY_CUDNN_CHECK(cudnnSetConvolutionGroupCount(plan->conv.d, to_int(g, "groups")));
  // f32 stays exact f32 (FMA math) unless the backend allows TF32; reduced-precision inputs and
  // TF32 use tensor cores.
  plan->exact = dtype == DType::f32 && !ctx_.tf32;
  CONVOY_CUDNN_CHECK(cudnnSetConvolutionMathType(plan->conv.d, plan->exact ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));

  const size_t limit = workspace_limit();
  const bool det = ctx_.deterministic, bench = ctx_.benchmark;
  ConvBuffers buffers{x.raw(), w.raw(), y.raw()};
  Tensor stand_in;  // what the benchmark writes instead of a tensor that must keep its values
  if (keep_written && bench) {
    const Tensor& written = kind == ConvKind::forward ? y : kind == ConvKind::backward_data ? x : w;
    stand_in = Tensor(written.shape(), written.dtype(), ctx_.tensors, written.layout());
    (kind == ConvKind::forward ? buffers.y : kind == ConvKind::backward_data ? buffers.x : buffers.w) = stand_in.raw();
  }
  bool chosen = false;
  // Exact f32 stays on the legacy calls: their algorithm list is what the exactness rules above
  // (transform_based) are written for; grouped convolutions too.
  if (conv_graph_api_ && !plan->exact && g == 1) {
    GraphConvSpec spec = graph_conv_spec(kind, p, x, w, y);
    spec.accumulate = accumulate;
    plan->graph = GraphConvPlan::build(ctx_.cudnn, spec, GraphConvChoice{bench, det, limit}, buffers.x, buffers.w,
                                       buffers.y, [this](size_t bytes) { return conv_workspace_.get(bytes); });
    if (plan->graph) {
      plan->workspace = plan->graph->workspace();
      chosen = true;
    }
  }
  if (!chosen) switch (kind) {
    case ConvKind::forward:
      chosen = choose_algorithm<ForwardCalls>(ctx_.cudnn, *plan, buffers, conv_workspace_, bench, det, limit);
      break;
    case ConvKind::backward_data:
      chosen = choose_algorithm<BackwardDataCalls>(ctx_.cudnn, *plan, buffers, conv_workspace_, bench, det, limit);
      break;
    case ConvKind::backward_filter:
      chosen = choose_algorithm<BackwardFilterCalls>(ctx_.cudnn, *plan, buffers, conv_workspace_, bench, det, limit);
      break;
  }
  if (!chosen)
    throw DeviceError(std::string(conv_op_name(kind)) + ": cuDNN has no " + (det ? "deterministic " : "") +
                      "algorithm for input " + describe(x) + ", weights " + describe(w) + ", output " +
                      describe(y) + ", groups " + std::to_string(g));
  // A failed search leaves an error behind in some cuDNN versions; it is not ours.
  cudaGetLastError();
  auto [it, inserted] = conv_plans_.emplace(key, std::move(plan));
  return *it->second;
}

namespace {

// cuDNN's tensor-core convolutions want nhwc channel counts that are multiples of 8; given a
// narrow bf16 input (a grayscale or RGB stem) it runs legacy kernels instead, which took most
// of the remaining time of an fmnet step on the H200. Zero channels added to x and w leave
// the output and the real channels' weight gradient unchanged.
constexpr int64_t kChannelAlign = 8;

int64_t aligned_channels(const Conv2dParams& p, const Tensor& x, const Tensor& w) {
  const bool narrow = x.layout() == Layout::nhwc && w.layout() == Layout::nhwc && x.dtype() != DType::f32 &&
                      p.groups == 1 && x.ndim() == 4 && x.dim(1) % kChannelAlign != 0;
  return narrow ? (x.dim(1) / kChannelAlign + 1) * kChannelAlign : 0;
}

// ImageNet-style stems (a 7x7/2 window over 3 colour channels) run as im2col and one cuBLAS
// GEMM, forward and weight gradient. cuDNN has one implicit-GEMM kernel for them whatever the
// API or engine: ResNet-50's stem at batch 256 on the H200 took 1.7 ms forward and 0.9-1.1 ms
// for the weight gradient there, the same GEMMs after im2col 0.36 + 0.32 ms (benchmarks/
// RESULTS.md). The data gradient, rarely wanted for a network's input, stays cuDNN's.
struct StemGemm {
  kernels::WindowShape shape;
  int64_t cols;  // r * s * c: a window's elements, in w's nhwc order (r, s, c)
  int64_t ld;    // cols rounded up to 8: 16-byte rows for im2col's stores and the tensor cores
};

std::optional<StemGemm> stem_gemm(const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& y) {
  const bool reduced = x.dtype() == DType::bf16 || x.dtype() == DType::f16;
  const bool nhwc = x.layout() == Layout::nhwc && w.layout() == Layout::nhwc && y.layout() == Layout::nhwc;
  if (!reduced || !nhwc || p.groups != 1 || p.dilation_h != 1 || p.dilation_w != 1 || x.dim(1) >= kChannelAlign ||
      w.dim(2) * w.dim(3) < 25)
    return std::nullopt;
  StemGemm g;
  g.shape = {x.dim(0), x.dim(2), x.dim(3), x.dim(1), w.dim(2),   w.dim(3),
             p.stride_h, p.stride_w, p.pad_h, p.pad_w, y.dim(2), y.dim(3)};
  g.cols = w.dim(1) * w.dim(2) * w.dim(3);
  g.ld = (g.cols + 7) / 8 * 8;
  if (!kernels::im2col_fits(g.shape, g.ld) || y.numel() == 0) return std::nullopt;
  return g;
}

// x's windows as a (n * p * q, ld) matrix.
Tensor im2col(const CudaContext& ctx, const StemGemm& g, const Tensor& x) {
  Tensor col(Shape{g.shape.n * g.shape.p * g.shape.q, g.ld}, x.dtype(), ctx.tensors);
  kernels::im2col_nhwc(x.raw(), col.raw(), g.shape, g.ld, ctx.stream);
  return col;
}

// y (n * p * q, k) = col (n * p * q, ld) w (k, ld)^T: column-major y^T (k x npq) = w^T-as-stored
// (ld x k)^T col^T (ld x npq). w's rows get zero padding to ld columns first where cols < ld.
void stem_gemm_forward(const CudaContext& ctx, const StemGemm& g, const Tensor& x, const Tensor& w, Tensor& y) {
  const size_t es = dtype_size(x.dtype());
  const int64_t k = w.dim(0);
  Tensor wp = w;
  if (g.ld != g.cols) {
    wp = Tensor(Shape{k, g.ld}, w.dtype(), ctx.tensors);
    CONVOY_CUDA_CHECK(cudaMemsetAsync(wp.raw(), 0, wp.nbytes(), ctx.stream));
    CONVOY_CUDA_CHECK(cudaMemcpy2DAsync(wp.raw(), g.ld * es, w.raw(), g.cols * es, g.cols * es, k,
                                        cudaMemcpyDeviceToDevice, ctx.stream));
  }
  const Tensor col = im2col(ctx, g, x);
  const cudaDataType_t t = cublas_type(x.dtype());
  const int ki = to_int(k, "K"), ld = to_int(g.ld, "RSC");
  CONVOY_CUBLAS_CHECK(cublasGemmEx(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, ki, to_int(col.dim(0), "NPQ"), ld, &kOne,
                                   wp.raw(), t, ld, col.raw(), t, ld, &kZero, y.raw(), t, ki, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
}

// dw (k, ld) = dy (npq, k)^T col (npq, ld): column-major dw^T (ld x k) = col^T (ld x npq) dy (npq x k);
// the first cols columns of each row are dw's.
void stem_gemm_backward_weights(const CudaContext& ctx, const StemGemm& g, const Tensor& x, const Tensor& dy,
                                Tensor& dw) {
  const size_t es = dtype_size(dw.dtype());
  const int64_t k = dw.dim(0);
  Tensor dwp = g.ld == g.cols ? dw : Tensor(Shape{k, g.ld}, dw.dtype(), ctx.tensors);
  const Tensor col = im2col(ctx, g, x);
  const cudaDataType_t t = cublas_type(x.dtype());
  const int ki = to_int(k, "K"), ld = to_int(g.ld, "RSC");
  CONVOY_CUBLAS_CHECK(cublasGemmEx(ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_T, ld, ki, to_int(col.dim(0), "NPQ"), &kOne,
                                   col.raw(), t, ld, dy.raw(), t, ki, &kZero, dwp.raw(), t, ld, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
  if (g.ld != g.cols)
    CONVOY_CUDA_CHECK(cudaMemcpy2DAsync(dw.raw(), g.cols * es, dwp.raw(), g.ld * es, g.cols * es, k,
                                        cudaMemcpyDeviceToDevice, ctx.stream));
}

}  // namespace

Tensor CudaOps::padded_channels(const Tensor& t, int64_t channels) {
  Tensor out(Shape{t.dim(0), channels, t.dim(2), t.dim(3)}, t.dtype(), ctx_.tensors, Layout::nhwc);
  CONVOY_CUDA_CHECK(cudaMemsetAsync(out.raw(), 0, out.nbytes(), ctx_.stream));
  kernels::copy_channels(static_cast<int>(dtype_size(t.dtype())), /*to_y=*/true, t.raw(), out.raw(),
                         t.dim(0) * t.dim(2) * t.dim(3), t.dim(1), channels, 0, 1, ctx_.stream);
  return out;
}

void CudaOps::conv2d_forward(const Conv2dParams& p, const Tensor& x, const Tensor& w,
                             const Tensor& b, Tensor& y) {
  check_conv2d_forward(p, x, w, b, y, device());
  require_supported(OpKind::conv2d_forward, x);
  if (const std::optional<StemGemm> g = stem_gemm_ ? stem_gemm(p, x, w, y) : std::nullopt) {
    stem_gemm_forward(ctx_, *g, x, w, y);
  } else {
    // x and w with their channels padded where cuDNN wants it (Tensor copies share storage).
    const int64_t c = aligned_channels(p, x, w);
    const Tensor xc = c ? padded_channels(x, c) : x;
    const Tensor wc = c ? padded_channels(w, c) : w;
    ConvPlan& plan = conv_plan(ConvKind::forward, p, xc, wc, y);
    void* ws = conv_workspace_.get(plan.workspace);
    if (plan.graph) plan.graph->run(ctx_.cudnn, xc.raw(), wc.raw(), y.raw(), ws);
    else CONVOY_CUDNN_CHECK(cudnnConvolutionForward(ctx_.cudnn, &kOne, plan.x.d, xc.raw(), plan.w.d, wc.raw(),
                                                    plan.conv.d, static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo),
                                                    ws, plan.workspace, &kZero, plan.y.d, y.raw()));
  }
  if (b.defined()) {
    const ChannelView v = channel_view(y);
    kernels::bias_add(dt_of(y.dtype()), y.raw(), dt_of(b.dtype()), b.raw(), v.outer, v.channels,
                      v.inner, ctx_.stream);
  }
}

bool CudaOps::conv2d_forward_fused(const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& b,
                                   const Tensor* residual, bool relu, Tensor& y) {
  check_conv2d_forward(p, x, w, b, y, device());
  CONVOY_CHECK(b.defined() && b.dtype() == DType::f32, "conv2d_forward_fused: an f32 bias (K)");
  CONVOY_CHECK(!residual || (residual->shape() == y.shape() && residual->dtype() == y.dtype() &&
                             residual->layout() == y.layout()),
               "conv2d_forward_fused: the residual must have the output's shape, dtype and layout");
  // The graph API's convolutions only: reduced precision or TF32, ungrouped, no padded channels
  // and no stem GEMM (those run their own way).
  const bool exact = x.dtype() == DType::f32 && !ctx_.tf32;
  if (!conv_graph_api_ || exact || p.groups != 1 || aligned_channels(p, x, w) ||
      (stem_gemm_ && stem_gemm(p, x, w, y).has_value()))
    return false;
  const std::array<int64_t, 24> key = {
      static_cast<int64_t>(x.dtype()), static_cast<int64_t>(x.layout()), static_cast<int64_t>(w.layout()),
      static_cast<int64_t>(y.layout()), x.dim(0), x.dim(1), x.dim(2), x.dim(3), w.dim(0), w.dim(2), w.dim(3),
      y.dim(2), y.dim(3), p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dilation_h, p.dilation_w,
      residual != nullptr, relu, 0, 0, 0};
  auto it = fused_conv_plans_.find(key);
  if (it == fused_conv_plans_.end()) {
    GraphConvSpec spec = graph_conv_spec(ConvKind::forward, p, x, w, y);
    spec.bias = true;
    spec.residual = residual != nullptr;
    spec.relu = relu;
    // The benchmark writes a stand-in: y may be a buffer whose values are still read (it is not,
    // in a forward pass, but a recording's buffers are better left alone).
    const Tensor stand_in(y.shape(), y.dtype(), ctx_.tensors, y.layout());
    // cuDNN 9.14's fused engines are all compiled at run time: taken for bf16 and f16 (ResNet-50
    // bf16 inference on the H200 25.7k -> 32.8k img/s at batch 256, RESULTS.md). Not for TF32,
    // where they were first tried when a served batch and the same plan built again differed by
    // 7.5e-6 (two builds timing different engines fastest, which GraphConvPlan's engine memory now
    // prevents); not tried again since.
    const int compiled_engines =
        x.dtype() != DType::f32 ? ctx_.tunables.cudnn_compiled.value_or(kCudnnCompiledDefault) : 0;
    const auto started = std::chrono::steady_clock::now();
    std::unique_ptr<GraphConvPlan> plan = GraphConvPlan::build(
        ctx_.cudnn, spec, GraphConvChoice{ctx_.benchmark, ctx_.deterministic, workspace_limit(), compiled_engines},
        x.raw(), w.raw(), stand_in.raw(), [this](size_t bytes) { return conv_workspace_.get(bytes); },
        GraphConvOperands{b.raw(), residual ? residual->raw() : nullptr});
    if (ctx_.tunables.verbose) {
      std::cerr << "convoy: fused convolution + bias" << (residual ? " + add" : "") << (relu ? " + relu" : "")
                << " for x " << shape_str(x.shape()) << " w " << shape_str(w.shape());
      if (plan)
        std::cerr << ": plan built in "
                  << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count()
                  << " ms\n";
      else
        std::cerr << ": cuDNN has none; the ops run one by one\n";
    }
    it = fused_conv_plans_.emplace(key, std::move(plan)).first;
  }
  if (!it->second) return false;
  void* ws = conv_workspace_.get(it->second->workspace());
  it->second->run(ctx_.cudnn, x.raw(), w.raw(), y.raw(), ws, GraphConvOperands{b.raw(), residual ? residual->raw() : nullptr});
  return true;
}

void CudaOps::conv2d_backward_data(const Conv2dParams& p, const Tensor& dy, const Tensor& w,
                                   Tensor& dx, bool accumulate) {
  check_conv2d_backward_data(p, dy, w, dx, device());
  require_supported(OpKind::conv2d_backward_data, dy);
  ConvPlan& plan = conv_plan(ConvKind::backward_data, p, dx, w, dy, accumulate);
  void* ws = conv_workspace_.get(plan.workspace);
  if (plan.graph) plan.graph->run(ctx_.cudnn, dx.raw(), w.raw(), dy.raw(), ws);
  else CONVOY_CUDNN_CHECK(cudnnConvolutionBackwardData(
      ctx_.cudnn, &kOne, plan.w.d, w.raw(), plan.y.d, dy.raw(), plan.conv.d,
      static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo), ws, plan.workspace,
      accumulate ? &kOne : &kZero, plan.x.d, dx.raw()));
}

void CudaOps::conv2d_backward_weights(const Conv2dParams& p, const Tensor& x, const Tensor& dy,
                                      Tensor& dw, Tensor& db) {
  check_conv2d_backward_weights(p, x, dy, dw, db, device());
  require_supported(OpKind::conv2d_backward_weights, x);
  if (const std::optional<StemGemm> g = stem_gemm_ ? stem_gemm(p, x, dw, dy) : std::nullopt) {
    stem_gemm_backward_weights(ctx_, *g, x, dy, dw);
  } else {
    // x with its channels padded where cuDNN wants it, and dw computed padded, then cut back.
    const int64_t c = aligned_channels(p, x, dw);
    const Tensor xc = c ? padded_channels(x, c) : x;
    Tensor dwc =
        c ? Tensor(Shape{dw.dim(0), c, dw.dim(2), dw.dim(3)}, dw.dtype(), ctx_.tensors, Layout::nhwc) : dw;
    ConvPlan& plan = conv_plan(ConvKind::backward_filter, p, xc, dwc, dy);
    void* ws = conv_workspace_.get(plan.workspace);
    if (plan.graph) plan.graph->run(ctx_.cudnn, xc.raw(), dwc.raw(), dy.raw(), ws);
    else CONVOY_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
        ctx_.cudnn, &kOne, plan.x.d, xc.raw(), plan.y.d, dy.raw(), plan.conv.d,
        static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo), ws, plan.workspace, &kZero, plan.w.d,
        dwc.raw()));
    if (c)
      kernels::copy_channels(static_cast<int>(dtype_size(dw.dtype())), /*to_y=*/false, dw.raw(), dwc.raw(),
                             dw.dim(0) * dw.dim(2) * dw.dim(3), dw.dim(1), c, 0, 1, ctx_.stream);
  }
  if (db.defined()) {
    const ChannelView v = channel_view(dy);
    void* scratch = scratch_.get(kernels::bias_grad_scratch_bytes(v.outer, v.channels, v.inner));
    kernels::bias_grad(dt_of(dy.dtype()), dy.raw(), dt_of(db.dtype()), db.raw(), v.outer,
                       v.channels, v.inner, scratch, ctx_.stream);
  }
}

}  // namespace convoy::cuda
