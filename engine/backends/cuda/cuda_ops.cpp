#include "engine/backends/cuda/cuda_ops.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/backends/cuda/cuda_check.h"
#include "kernels/activation.cuh"
#include "kernels/batchnorm.cuh"
#include "kernels/bias.cuh"
#include "kernels/elementwise.cuh"
#include "kernels/normalize_augment.cuh"
#include "kernels/optimizer_update.cuh"
#include "kernels/pool2d.cuh"
#include "kernels/softmax.cuh"

namespace convoy::cuda {

using kernels::Dt;

static_assert(static_cast<int>(DType::f32) == static_cast<int>(Dt::f32) &&
              static_cast<int>(DType::bf16) == static_cast<int>(Dt::bf16) &&
              static_cast<int>(DType::f16) == static_cast<int>(Dt::f16) &&
              static_cast<int>(DType::i32) == static_cast<int>(Dt::i32) &&
              static_cast<int>(DType::u8) == static_cast<int>(Dt::u8),
              "kernels::Dt must mirror convoy::DType");

namespace {

Dt dt_of(DType d) { return static_cast<Dt>(static_cast<int>(d)); }


// cuDNN and cuBLAS take int sizes; a larger tensor is refused rather than truncated.
int to_int(int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX)
    throw InternalError(std::string(what) + " " + std::to_string(v) + " does not fit cuDNN/cuBLAS's int");
  return static_cast<int>(v);
}

struct Dims4 {
  int64_t n, c, h, w;
};

// 4-D (N, C, H, W) as is; 2-D (N, C) as (N, C, 1, 1) (the batch-norm checks allow no other rank).
Dims4 dims4(const Tensor& t) {
  if (t.ndim() == 4) return {t.dim(0), t.dim(1), t.dim(2), t.dim(3)};
  return {t.dim(0), t.dim(1), 1, 1};
}

// The (outer, C, inner) view in memory: nchw (N, C, H*W), nhwc (N*H*W, C, 1).
struct ChannelView {
  int64_t outer, channels, inner;
};
ChannelView channel_view(const Tensor& t) {
  if (t.ndim() < 2) return {1, t.numel(), 1};
  if (t.layout() == Layout::nhwc) return {t.dim(0) * t.dim(2) * t.dim(3), t.dim(1), 1};
  int64_t inner = 1;
  for (int i = 2; i < t.ndim(); ++i) inner *= t.dim(i);
  return {t.dim(0), t.dim(1), inner};
}

cudnnDataType_t cudnn_type(DType d) {
  switch (d) {
    case DType::f32: return CUDNN_DATA_FLOAT;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    case DType::f16: return CUDNN_DATA_HALF;
    default: throw InternalError("cuDNN: unsupported dtype " + std::string(dtype_name(d)));
  }
}

cudaDataType_t cublas_type(DType d) {
  switch (d) {
    case DType::f32: return CUDA_R_32F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    default: throw InternalError("cuBLAS: unsupported dtype " + std::string(dtype_name(d)));
  }
}

cudnnTensorFormat_t cudnn_format(Layout l) { return l == Layout::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW; }

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

// The first usable result of a heuristics or benchmark list (both come sorted, best first).
template <class Perf>
const Perf* pick_algo(const std::vector<Perf>& perf, int count, bool deterministic, size_t limit) {
  for (int i = 0; i < count; ++i) {
    const Perf& p = perf[static_cast<size_t>(i)];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    if (deterministic && p.determinism != CUDNN_DETERMINISTIC) continue;
    if (p.memory > limit) continue;
    return &p;
  }
  return nullptr;
}

constexpr float kOne = 1.f, kZero = 0.f;

}  // namespace

struct ConvPlan {
  TensorDesc x, y;  // x: the layer's input (or dx), y: its output (or dy)
  FilterDesc w;
  ConvDesc conv;
  int algo = 0;
  size_t workspace = 0;
  bool f32 = false;  // FMA math, never TF32
};

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

}  // namespace

CudaOps::CudaOps(const CudaContext& ctx) : ctx_(ctx) {
  conv_workspace_.bind(ctx_.allocator);
  scratch_.bind(ctx_.allocator);
  slots_.bind(ctx_.allocator);
  // For tests and debugging: batch norm through Convoy's kernels instead of cuDNN.
  if (const char* e = std::getenv("CONVOY_CUDA_BN_KERNELS"); e && std::strcmp(e, "1") == 0)
    bn_kernels_only_.fill(true);
}

CudaOps::~CudaOps() = default;

// ---- convolution ----------------------------------------------------------------------------

namespace {

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
  const auto* best = st == CUDNN_STATUS_SUCCESS ? pick_algo(found, nfound, deterministic, ws) : nullptr;
  if (!best) best = pick_algo(heur, got, deterministic, limit);
  if (!best) return false;
  plan.algo = best->algo;
  CONVOY_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv.d, plan.f32 ? CUDNN_FMA_MATH : best->mathType));
  plan.workspace = Calls::workspace(hd, plan, best->algo);
  return true;
}

}  // namespace

ConvPlan& CudaOps::conv_plan(ConvKind kind, const Conv2dParams& p, const Tensor& x, const Tensor& w,
                             const Tensor& y) {
  // The op checked the geometry (check_conv2d_*): y is conv2d_output_shape(x, w).
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const int64_t k = w.dim(0), cg = w.dim(1), r = w.dim(2), s = w.dim(3);
  const int64_t pp = y.dim(2), qq = y.dim(3);
  const int64_t g = p.groups;

  const std::array<int64_t, 24> key = {
      static_cast<int64_t>(kind), static_cast<int64_t>(x.dtype()), static_cast<int64_t>(x.layout()),
      static_cast<int64_t>(w.layout()), static_cast<int64_t>(y.layout()), n, c, h, wd, k, cg, r, s,
      pp, qq, p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dilation_h, p.dilation_w, g, 0, 0};
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
  // f32 stays exact f32 (FMA math: no TF32); reduced-precision inputs use tensor cores.
  plan->f32 = dtype == DType::f32;
  CONVOY_CUDNN_CHECK(cudnnSetConvolutionMathType(plan->conv.d, plan->f32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));

  size_t limit = size_t(1) << 30;
  {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) limit = std::min(limit, free_b / 2);
  }
  const ConvBuffers buffers{x.raw(), w.raw(), y.raw()};
  const bool det = ctx_.deterministic, bench = ctx_.benchmark;
  bool chosen = false;
  switch (kind) {
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
  // x and w with their channels padded where cuDNN wants it (Tensor copies share storage).
  const int64_t c = aligned_channels(p, x, w);
  const Tensor xc = c ? padded_channels(x, c) : x;
  const Tensor wc = c ? padded_channels(w, c) : w;
  ConvPlan& plan = conv_plan(ConvKind::forward, p, xc, wc, y);
  void* ws = conv_workspace_.get(plan.workspace);
  CONVOY_CUDNN_CHECK(cudnnConvolutionForward(ctx_.cudnn, &kOne, plan.x.d, xc.raw(), plan.w.d, wc.raw(),
                                             plan.conv.d, static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo),
                                             ws, plan.workspace, &kZero, plan.y.d, y.raw()));
  if (b.defined()) {
    const ChannelView v = channel_view(y);
    kernels::bias_add(dt_of(y.dtype()), y.raw(), dt_of(b.dtype()), b.raw(), v.outer, v.channels,
                      v.inner, ctx_.stream);
  }
}

void CudaOps::conv2d_backward_data(const Conv2dParams& p, const Tensor& dy, const Tensor& w,
                                   Tensor& dx) {
  check_conv2d_backward_data(p, dy, w, dx, device());
  ConvPlan& plan = conv_plan(ConvKind::backward_data, p, dx, w, dy);
  void* ws = conv_workspace_.get(plan.workspace);
  CONVOY_CUDNN_CHECK(cudnnConvolutionBackwardData(
      ctx_.cudnn, &kOne, plan.w.d, w.raw(), plan.y.d, dy.raw(), plan.conv.d,
      static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo), ws, plan.workspace, &kZero, plan.x.d,
      dx.raw()));
}

void CudaOps::conv2d_backward_weights(const Conv2dParams& p, const Tensor& x, const Tensor& dy,
                                      Tensor& dw, Tensor& db) {
  check_conv2d_backward_weights(p, x, dy, dw, db, device());
  // x with its channels padded where cuDNN wants it, and dw computed padded, then cut back.
  const int64_t c = aligned_channels(p, x, dw);
  const Tensor xc = c ? padded_channels(x, c) : x;
  Tensor dwc = c ? Tensor(Shape{dw.dim(0), c, dw.dim(2), dw.dim(3)}, dw.dtype(), ctx_.tensors, Layout::nhwc) : dw;
  ConvPlan& plan = conv_plan(ConvKind::backward_filter, p, xc, dwc, dy);
  void* ws = conv_workspace_.get(plan.workspace);
  CONVOY_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      ctx_.cudnn, &kOne, plan.x.d, xc.raw(), plan.y.d, dy.raw(), plan.conv.d,
      static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo), ws, plan.workspace, &kZero, plan.w.d,
      dwc.raw()));
  if (c)
    kernels::copy_channels(static_cast<int>(dtype_size(dw.dtype())), /*to_y=*/false, dw.raw(), dwc.raw(),
                           dw.dim(0) * dw.dim(2) * dw.dim(3), dw.dim(1), c, 0, 1, ctx_.stream);
  if (db.defined()) {
    const ChannelView v = channel_view(dy);
    void* scratch = scratch_.get(kernels::bias_grad_scratch_bytes(v.outer, v.channels, v.inner));
    kernels::bias_grad(dt_of(dy.dtype()), dy.raw(), dt_of(db.dtype()), db.raw(), v.outer,
                         v.channels, v.inner, scratch, ctx_.stream);
  }
}

// ---- batch norm -----------------------------------------------------------------------------

namespace {
// cuDNN refused this configuration: Convoy's kernels do it instead.
bool cudnn_refused(cudnnStatus_t st) {
  return st == CUDNN_STATUS_NOT_SUPPORTED || st == CUDNN_STATUS_BAD_PARAM;
}

// With CONVOY_CUDA_VERBOSE=1, one line on stderr when batch norm leaves cuDNN for a dtype.
void note_bn_fallback(const char* op, DType dt, cudnnStatus_t st) {
  if (const char* e = std::getenv("CONVOY_CUDA_VERBOSE"); e && std::strcmp(e, "1") == 0)
    std::fprintf(stderr, "convoy: %s: cuDNN refused %s (%s); Convoy's batch-norm kernels take over\n",
                 op, std::string(dtype_name(dt)).c_str(), cudnnGetErrorString(st));
}
}  // namespace

void CudaOps::batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                      float momentum, float eps, Tensor& running_mean,
                                      Tensor& running_var, Tensor& y, Tensor& saved_mean,
                                      Tensor& saved_invstd) {
  const char* op = "batchnorm_forward_train";
  check_batchnorm_forward_train(x, gamma, beta, eps, running_mean, running_var, y, saved_mean, saved_invstd,
                                device());
  const Dims4 d = dims4(x);
  const int di = static_cast<int>(x.dtype());
  if (use_cudnn_bn(x)) {
    TensorDesc xd, bd;
    xd.set(d, x.dtype(), x.layout());
    CONVOY_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(bd.d, xd.d, CUDNN_BATCHNORM_SPATIAL));
    // cuDNN's running update is running = (1 - f) running + f batch with the unbiased
    // variance, f = exponentialAverageFactor: PyTorch's momentum exactly.
    const cudnnStatus_t st = cudnnBatchNormalizationForwardTraining(
        ctx_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, xd.d, x.raw(), xd.d, y.raw(), bd.d,
        gamma.raw(), beta.raw(), momentum, running_mean.raw(), running_var.raw(), eps,
        saved_mean.raw(), saved_invstd.raw());
    if (st == CUDNN_STATUS_SUCCESS) return;
    if (!cudnn_refused(st)) CONVOY_CUDNN_CHECK(st);
    note_bn_fallback(op, x.dtype(), st);
    bn_kernels_only_[di] = true;
  }
  const ChannelView v = channel_view(x);
  void* scratch = scratch_.get(kernels::batchnorm_scratch_bytes(v.outer, v.channels, v.inner));
  kernels::batchnorm_forward_train(dt_of(x.dtype()), x.raw(), gamma.data<float>(), beta.data<float>(),
                                   momentum, eps, running_mean.data<float>(),
                                   running_var.data<float>(), y.raw(), saved_mean.data<float>(),
                                   saved_invstd.data<float>(), v.outer, v.channels, v.inner,
                                   scratch, ctx_.stream);
}

void CudaOps::batchnorm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                     const Tensor& running_mean, const Tensor& running_var,
                                     float eps, Tensor& y) {
  const char* op = "batchnorm_forward_eval";
  check_batchnorm_forward_eval(x, gamma, beta, running_mean, running_var, eps, y, device());
  const Dims4 d = dims4(x);
  const int di = static_cast<int>(x.dtype());
  if (use_cudnn_bn(x)) {
    TensorDesc xd, bd;
    xd.set(d, x.dtype(), x.layout());
    CONVOY_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(bd.d, xd.d, CUDNN_BATCHNORM_SPATIAL));
    const cudnnStatus_t st = cudnnBatchNormalizationForwardInference(
        ctx_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, xd.d, x.raw(), xd.d, y.raw(), bd.d,
        gamma.raw(), beta.raw(), running_mean.raw(), running_var.raw(), eps);
    if (st == CUDNN_STATUS_SUCCESS) return;
    if (!cudnn_refused(st)) CONVOY_CUDNN_CHECK(st);
    note_bn_fallback(op, x.dtype(), st);
    bn_kernels_only_[di] = true;
  }
  const ChannelView v = channel_view(x);
  kernels::batchnorm_forward_eval(dt_of(x.dtype()), x.raw(), gamma.data<float>(), beta.data<float>(),
                                  running_mean.data<float>(), running_var.data<float>(), eps,
                                  y.raw(), v.outer, v.channels, v.inner, ctx_.stream);
}

void CudaOps::batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                 const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx,
                                 Tensor& dgamma, Tensor& dbeta) {
  const char* op = "batchnorm_backward";
  check_batchnorm_backward(x, dy, gamma, saved_mean, saved_invstd, dx, dgamma, dbeta, device());
  const Dims4 d = dims4(x);
  const int di = static_cast<int>(x.dtype());
  if (use_cudnn_bn(x) && dx.defined()) {
    TensorDesc xd, bd;
    xd.set(d, x.dtype(), x.layout());
    CONVOY_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(bd.d, xd.d, CUDNN_BATCHNORM_SPATIAL));
    // With the saved statistics given, cuDNN does not recompute them, so the forward eps
    // is not needed; any valid value goes here.
    const cudnnStatus_t st = cudnnBatchNormalizationBackward(
        ctx_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, &kOne, &kZero, xd.d, x.raw(), xd.d,
        dy.raw(), xd.d, dx.raw(), bd.d, gamma.raw(), dgamma.raw(), dbeta.raw(), 1e-5,
        saved_mean.raw(), saved_invstd.raw());
    if (st == CUDNN_STATUS_SUCCESS) return;
    if (!cudnn_refused(st)) CONVOY_CUDNN_CHECK(st);
    note_bn_fallback(op, x.dtype(), st);
    bn_kernels_only_[di] = true;
  }
  const ChannelView v = channel_view(x);
  void* scratch = scratch_.get(kernels::batchnorm_scratch_bytes(v.outer, v.channels, v.inner));
  kernels::batchnorm_backward(dt_of(x.dtype()), x.raw(), dy.raw(), gamma.data<float>(),
                              saved_mean.data<float>(), saved_invstd.data<float>(),
                              dx.defined() ? dx.raw() : nullptr, dgamma.data<float>(),
                              dbeta.data<float>(), v.outer, v.channels, v.inner, scratch,
                              ctx_.stream);
}

// ---- activations, pooling -------------------------------------------------------------------

void CudaOps::activation_forward(Activation kind, float alpha, const Tensor& x, Tensor& y) {
  check_activation_forward(x, y, device());
  kernels::activation_forward(kind, alpha, dt_of(x.dtype()), x.raw(), y.raw(), x.numel(),
                              ctx_.stream);
}

void CudaOps::activation_backward(Activation kind, float alpha, const Tensor& x, const Tensor& y,
                                  const Tensor& dy, Tensor& dx) {
  check_activation_backward(kind, alpha, x, y, dy, dx, device());
  // relu and leaky relu (alpha > 0) have the sign of their input, so y serves as well as x.
  const Tensor& in = x.defined() || !activation_backward_reads_output(kind, alpha) ? x : y;
  kernels::activation_backward(kind, alpha, dt_of(in.dtype()), in.raw(), dy.raw(), dx.raw(),
                               in.numel(), ctx_.stream);
}

namespace {
// x (N, C, H, W) and y (N, C, P, Q), checked by check_pool2d_* (y is pool2d_output_shape(x)).
kernels::PoolShape pool_shape(const Pool2dParams& p, const Tensor& x, const Tensor& y) {
  kernels::PoolShape s{};
  s.n = x.dim(0); s.c = x.dim(1); s.h = x.dim(2); s.w = x.dim(3);
  s.p = y.dim(2); s.q = y.dim(3);
  s.kernel_h = static_cast<int>(p.kernel_h); s.kernel_w = static_cast<int>(p.kernel_w);
  s.stride_h = static_cast<int>(p.stride_h); s.stride_w = static_cast<int>(p.stride_w);
  s.pad_h = static_cast<int>(p.pad_h); s.pad_w = static_cast<int>(p.pad_w);
  s.nhwc = x.layout() == Layout::nhwc;
  s.max = p.kind == PoolKind::max;
  return s;
}
}  // namespace

void CudaOps::pool2d_forward(const Pool2dParams& p, const Tensor& x, Tensor& y, Tensor& workspace,
                             bool training) {
  check_pool2d_forward(p, x, y, device());
  const kernels::PoolShape s = pool_shape(p, x, y);
  // Backward finds each window's maximum again from x, so no workspace is kept.
  kernels::pool2d_forward(s, dt_of(x.dtype()), x.raw(), y.raw(), ctx_.stream);
}

void CudaOps::pool2d_backward(const Pool2dParams& p, const Tensor& x, const Tensor& y,
                              const Tensor& dy, const Tensor& workspace, Tensor& dx) {
  check_pool2d_backward(p, x, y, dy, dx, device());
  const kernels::PoolShape s = pool_shape(p, x, dy);
  kernels::pool2d_backward(s, dt_of(x.dtype()), x.raw(), dy.raw(), dx.raw(), ctx_.stream);
}

// ---- linear ---------------------------------------------------------------------------------
// Row-major (N, K) x (M, K)^T is, seen column-major, y^T (M x N) = w^T-as-stored (K x M)^T . x^T (K x N).

void CudaOps::linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  check_linear_forward(x, w, b, y, device());
  const int n = to_int(x.dim(0), "N"), k = to_int(x.dim(1), "K"), m = to_int(w.dim(0), "M");
  const cudaDataType_t t = cublas_type(x.dtype());
  if (n > 0 && m > 0) {
    if (k == 0) {
      kernels::fill(dt_of(y.dtype()), y.raw(), 0.f, y.numel(), ctx_.stream);
    } else {
      CONVOY_CUBLAS_CHECK(cublasGemmEx(ctx_.cublas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &kOne, w.raw(), t, k,
                                       x.raw(), t, k, &kZero, y.raw(), t, m, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT));
    }
  }
  if (b.defined()) {
    kernels::bias_add(dt_of(y.dtype()), y.raw(), dt_of(b.dtype()), b.raw(), n, m, 1, ctx_.stream);
  }
}

void CudaOps::linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
                              Tensor& dw, Tensor& db) {
  check_linear_backward(x, w, dy, dx, dw, db, device());
  const int n = to_int(x.dim(0), "N"), k = to_int(x.dim(1), "K"), m = to_int(w.dim(0), "M");
  const cudaDataType_t t = cublas_type(x.dtype());
  if (dx.defined()) {
    // dx (N, K) = dy (N, M) w (M, K): column-major dx^T (K x N) = w^T (K x M) dy^T (M x N).
    if (m == 0) kernels::fill(dt_of(dx.dtype()), dx.raw(), 0.f, dx.numel(), ctx_.stream);
    else if (n > 0 && k > 0)
      CONVOY_CUBLAS_CHECK(cublasGemmEx(ctx_.cublas, CUBLAS_OP_N, CUBLAS_OP_N, k, n, m, &kOne, w.raw(), t, k,
                                       dy.raw(), t, m, &kZero, dx.raw(), t, k, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT));
  }
  // dw (M, K) = dy^T (M, N) x (N, K): column-major dw^T (K x M) = x^T (K x N) dy (N x M).
  if (n == 0) kernels::fill(dt_of(dw.dtype()), dw.raw(), 0.f, dw.numel(), ctx_.stream);
  else if (m > 0 && k > 0)
    CONVOY_CUBLAS_CHECK(cublasGemmEx(ctx_.cublas, CUBLAS_OP_N, CUBLAS_OP_T, k, m, n, &kOne, x.raw(), t, k,
                                     dy.raw(), t, m, &kZero, dw.raw(), t, k, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT));
  if (db.defined()) {
    void* scratch = scratch_.get(kernels::bias_grad_scratch_bytes(n, m, 1));
    kernels::bias_grad(dt_of(dy.dtype()), dy.raw(), dt_of(db.dtype()), db.raw(), n, m, 1, scratch,
                         ctx_.stream);
  }
}

// ---- adds, concat, split, dropout -----------------------------------------------------------

void CudaOps::add(const Tensor& a, const Tensor& b, Tensor& y) {
  check_add(a, b, y, device());
  kernels::add(dt_of(a.dtype()), a.raw(), b.raw(), y.raw(), a.numel(), ctx_.stream);
}

void CudaOps::add_inplace(Tensor& y, const Tensor& x) {
  check_add_inplace(y, x, device());
  kernels::add_inplace(dt_of(y.dtype()), y.raw(), x.raw(), y.numel(), ctx_.stream);
}

void CudaOps::concat_channels(std::span<const Tensor> xs, Tensor& y) {
  std::vector<const Tensor*> ptrs;
  for (const Tensor& x : xs) ptrs.push_back(&x);
  check_concat_channels("concat_channels", ptrs, y, device());
  const ChannelView v = channel_view(y);
  int64_t offset = 0;
  for (const Tensor& x : xs) {
    kernels::copy_channels(static_cast<int>(dtype_size(x.dtype())), true, x.raw(), y.raw(), v.outer,
                           x.dim(1), v.channels, offset, v.inner, ctx_.stream);
    offset += x.dim(1);
  }
}

void CudaOps::split_channels(const Tensor& y, std::span<Tensor> xs) {
  std::vector<const Tensor*> ptrs;
  for (const Tensor& x : xs) ptrs.push_back(&x);
  check_concat_channels("split_channels", ptrs, y, device());
  const ChannelView v = channel_view(y);
  int64_t offset = 0;
  for (Tensor& x : xs) {
    kernels::copy_channels(static_cast<int>(dtype_size(x.dtype())), false, x.raw(),
                           const_cast<void*>(y.raw()), v.outer, x.dim(1), v.channels, offset,
                           v.inner, ctx_.stream);
    offset += x.dim(1);
  }
}

void CudaOps::dropout_forward(float p, uint64_t seed, const Tensor& x, Tensor& y) {
  check_dropout("dropout_forward", p, x, y, device());
  kernels::dropout(dt_of(x.dtype()), p, seed, x.raw(), y.raw(), x.numel(), ctx_.stream);
}

void CudaOps::dropout_backward(float p, uint64_t seed, const Tensor& dy, Tensor& dx) {
  check_dropout("dropout_backward", p, dy, dx, device());
  kernels::dropout(dt_of(dy.dtype()), p, seed, dy.raw(), dx.raw(), dy.numel(), ctx_.stream);
}

// ---- softmax, losses ------------------------------------------------------------------------

void CudaOps::softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float smoothing,
                                    Tensor& loss, Tensor& dlogits, Tensor& correct) {
  check_softmax_cross_entropy(logits, labels, smoothing, loss, dlogits, correct, device());
  const int64_t n = logits.dim(0), c = logits.dim(1);
  void* scratch = scratch_.get(kernels::softmax_cross_entropy_scratch_bytes(n));
  kernels::softmax_cross_entropy(dt_of(logits.dtype()), logits.raw(), labels.data<int32_t>(),
                                 smoothing, loss.data<float>(),
                                 dlogits.defined() ? dlogits.raw() : nullptr,
                                 correct.defined() ? correct.data<int32_t>() : nullptr, n, c,
                                 scratch, ctx_.stream);
}

void CudaOps::softmax(const Tensor& logits, Tensor& probs) {
  check_softmax(logits, probs, device());
  kernels::softmax(dt_of(logits.dtype()), logits.raw(), probs.data<float>(), logits.dim(0),
                   logits.dim(1), ctx_.stream);
}

// ---- cast, fill -----------------------------------------------------------------------------

void CudaOps::cast(const Tensor& x, Tensor& y) {
  check_cast(x, y, device());
  if (!same_memory_order(x, y)) {
    kernels::cast_layout(dt_of(x.dtype()), x.raw(), dt_of(y.dtype()), y.raw(), x.dim(0), x.dim(1),
                         x.dim(2) * x.dim(3), y.layout() == Layout::nhwc, ctx_.stream);
    return;
  }
  kernels::cast(dt_of(x.dtype()), x.raw(), dt_of(y.dtype()), y.raw(), x.numel(), ctx_.stream);
}

void CudaOps::fill(Tensor& y, float value) {
  check_fill(y, device());
  kernels::fill(dt_of(y.dtype()), y.raw(), value, y.numel(), ctx_.stream);
}

// ---- optimizers -----------------------------------------------------------------------------

void* CudaOps::upload_slots(const std::vector<unsigned char>& bytes) {
  void* before = slots_.get(0);
  void* dev = slots_.get(bytes.size());
  // Same slots as last step: the device copy is current (and a captured graph stays valid).
  if (dev == before && bytes == slots_host_) return dev;
  CONVOY_CUDA_CHECK(cudaMemcpyAsync(dev, bytes.data(), bytes.size(), cudaMemcpyHostToDevice, ctx_.stream));
  slots_host_ = bytes;
  return dev;
}

namespace {
template <class Slot>
std::vector<unsigned char> pack_slots(const std::vector<Slot>& slots, std::vector<int64_t>& block_start) {
  block_start.assign(1, 0);
  for (const Slot& s : slots)
    block_start.push_back(block_start.back() + (s.n + kernels::kOptimChunk - 1) / kernels::kOptimChunk);
  const size_t a = slots.size() * sizeof(Slot), b = block_start.size() * sizeof(int64_t);
  std::vector<unsigned char> bytes(a + b);
  std::memcpy(bytes.data(), slots.data(), a);
  std::memcpy(bytes.data() + a, block_start.data(), b);
  return bytes;
}
}  // namespace

void CudaOps::sgd_update(std::span<const SgdSlot> slots, const SgdHyper& h) {
  check_sgd_update(slots, h, device());
  std::vector<kernels::SgdSlotDev> dev;
  for (const SgdSlot& s : slots) {
    const int64_t n = s.param->numel();
    const bool has_buf = s.momentum_buf && s.momentum_buf->defined();
    float* buf = has_buf ? s.momentum_buf->data<float>() : nullptr;
    if (n > 0) dev.push_back({s.param->data<float>(), s.grad->data<float>(), buf, s.weight_decay, n});
  }
  if (dev.empty()) return;
  std::vector<int64_t> block_start;
  const std::vector<unsigned char> bytes = pack_slots(dev, block_start);
  auto* base = static_cast<unsigned char*>(upload_slots(bytes));
  kernels::sgd_update(reinterpret_cast<const kernels::SgdSlotDev*>(base),
                      reinterpret_cast<const int64_t*>(base + dev.size() * sizeof(kernels::SgdSlotDev)),
                      static_cast<int>(dev.size()), block_start.back(), h.lr, h.momentum, h.nesterov,
                      ctx_.stream);
}

void CudaOps::adamw_update(std::span<const AdamSlot> slots, const AdamHyper& h) {
  check_adamw_update(slots, h, device());
  std::vector<kernels::AdamSlotDev> dev;
  for (const AdamSlot& s : slots) {
    const int64_t n = s.param->numel();
    if (n > 0)
      dev.push_back({s.param->data<float>(), s.grad->data<float>(), s.m->data<float>(),
                     s.v->data<float>(), s.weight_decay, n});
  }
  if (dev.empty()) return;
  std::vector<int64_t> block_start;
  const std::vector<unsigned char> bytes = pack_slots(dev, block_start);
  auto* base = static_cast<unsigned char*>(upload_slots(bytes));
  const double t = static_cast<double>(h.step);
  const float step_size = static_cast<float>(h.lr / (1.0 - std::pow(static_cast<double>(h.beta1), t)));
  const float inv_sqrt_bc2 =
      static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(static_cast<double>(h.beta2), t)));
  kernels::adamw_update(reinterpret_cast<const kernels::AdamSlotDev*>(base),
                        reinterpret_cast<const int64_t*>(base + dev.size() * sizeof(kernels::AdamSlotDev)),
                        static_cast<int>(dev.size()), block_start.back(), h.lr, h.beta1, h.beta2,
                        h.eps, step_size, inv_sqrt_bc2, ctx_.stream);
}

// ---- input pipeline -------------------------------------------------------------------------

void CudaOps::normalize_augment(const Tensor& images, const NormalizeAugment& a, uint64_t seed,
                                Tensor& y) {
  check_normalize_augment(images, a, y, device());
  kernels::NormalizeAugmentArgs k{};
  for (int i = 0; i < 4; ++i) {
    k.mean[i] = a.mean[i];
    k.std[i] = a.std[i];
  }
  k.crop_padding = a.crop_padding;
  k.horizontal_flip = a.horizontal_flip;
  k.seed = seed;
  k.n = images.dim(0); k.c = images.dim(1); k.h = images.dim(2); k.w = images.dim(3);
  k.nhwc_out = y.layout() == Layout::nhwc;
  kernels::normalize_augment(k, images.data<uint8_t>(), dt_of(y.dtype()), y.raw(), ctx_.stream);
}

}  // namespace convoy::cuda
