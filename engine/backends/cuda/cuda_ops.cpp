#include "engine/backends/cuda/cuda_ops.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
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


void expect(bool cond, const std::string& msg) {
  if (!cond) throw InternalError(msg);
}

bool is_float(DType d) { return d == DType::f32 || d == DType::bf16 || d == DType::f16; }

// The tensor is defined and lives on this backend's device.
void check_here(const CudaContext& ctx, const Tensor& t, const char* op, const char* name) {
  expect(t.defined(), std::string(op) + ": " + name + " is undefined");
  expect(t.device() == Device::cuda(ctx.device),
         std::string(op) + ": " + name + " is " + describe(t) + ", expected a tensor on cuda:" +
             std::to_string(ctx.device));
}

void check_float(const CudaContext& ctx, const Tensor& t, const char* op, const char* name) {
  check_here(ctx, t, op, name);
  expect(is_float(t.dtype()),
         std::string(op) + ": " + name + " must be F32, BF16 or F16, got " + describe(t));
}

void check_f32(const CudaContext& ctx, const Tensor& t, int64_t numel, const char* op,
               const char* name) {
  check_here(ctx, t, op, name);
  expect(t.dtype() == DType::f32 && t.numel() == numel,
         std::string(op) + ": " + name + " must be F32 with " + std::to_string(numel) +
             " elements, got " + describe(t));
}

struct Named {
  const Tensor& tensor;
  const char* name;
};

// Each of `params` must be an F32 vector of `channels` elements on this device.
void check_per_channel(const CudaContext& ctx, int64_t channels, const char* op, std::initializer_list<Named> params) {
  for (const Named& p : params) check_f32(ctx, p.tensor, channels, op, p.name);
}

void check_like(const Tensor& a, const Tensor& b, const char* op, const char* an, const char* bn) {
  expect(a.shape() == b.shape() && a.dtype() == b.dtype() && a.layout() == b.layout(),
         std::string(op) + ": " + an + " " + describe(a) + " and " + bn + " " + describe(b) +
             " must have the same shape, dtype and layout");
}

int to_int(int64_t v, const char* what) {
  expect(v >= 0 && v <= INT_MAX, std::string(what) + " " + std::to_string(v) + " does not fit cuDNN/cuBLAS's int");
  return static_cast<int>(v);
}

struct Dims4 {
  int64_t n, c, h, w;
};

// 4-D (N, C, H, W) as is; 2-D (N, C) as (N, C, 1, 1).
Dims4 dims4(const Tensor& t, const char* op, const char* name) {
  if (t.ndim() == 4) return {t.dim(0), t.dim(1), t.dim(2), t.dim(3)};
  if (t.ndim() == 2) return {t.dim(0), t.dim(1), 1, 1};
  throw InternalError(std::string(op) + ": " + name + " must be (N, C, H, W) or (N, C), got " +
                      describe(t));
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
};

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

ConvPlan& CudaOps::conv_plan(ConvKind kind, const Conv2dParams& p, const Tensor& x, const Tensor& w,
                             const Tensor& y, const void* x_ptr, const void* w_ptr,
                             const void* y_ptr) {
  const char* op = kind == ConvKind::forward         ? "conv2d_forward"
                   : kind == ConvKind::backward_data ? "conv2d_backward_data"
                                                     : "conv2d_backward_weights";
  expect(x.ndim() == 4 && w.ndim() == 4 && y.ndim() == 4,
         std::string(op) + ": expected 4-D tensors, got x " + describe(x) + ", w " + describe(w) +
             ", y " + describe(y));
  expect(x.dtype() == w.dtype() && x.dtype() == y.dtype() && is_float(x.dtype()),
         std::string(op) + ": x, w and y must share one floating dtype, got " + describe(x) + ", " +
             describe(w) + ", " + describe(y));
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const int64_t k = w.dim(0), cg = w.dim(1), r = w.dim(2), s = w.dim(3);
  const int64_t g = p.groups;
  expect(g >= 1 && c % g == 0 && k % g == 0 && cg == c / g,
         std::string(op) + ": weights " + describe(w) + " do not fit input " + describe(x) +
             " with groups " + std::to_string(g));
  expect(p.stride_h >= 1 && p.stride_w >= 1 && p.dilation_h >= 1 && p.dilation_w >= 1 &&
             p.pad_h >= 0 && p.pad_w >= 0,
         std::string(op) + ": invalid stride, padding or dilation");
  const int64_t pp = (h + 2 * p.pad_h - p.dilation_h * (r - 1) - 1) / p.stride_h + 1;
  const int64_t qq = (wd + 2 * p.pad_w - p.dilation_w * (s - 1) - 1) / p.stride_w + 1;
  expect(y.dim(0) == n && y.dim(1) == k && y.dim(2) == pp && y.dim(3) == qq,
         std::string(op) + ": output " + describe(y) + " should be " + shape_str({n, k, pp, qq}) +
             " for input " + describe(x) + " and weights " + describe(w));

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
  const bool f32 = dtype == DType::f32;
  CONVOY_CUDNN_CHECK(cudnnSetConvolutionMathType(plan->conv.d, f32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));

  size_t limit = size_t(1) << 30;
  {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) limit = std::min(limit, free_b / 2);
  }
  const bool det = ctx_.deterministic;
  auto finish = [&](int algo, cudnnMathType_t math) {
    plan->algo = algo;
    CONVOY_CUDNN_CHECK(cudnnSetConvolutionMathType(plan->conv.d, f32 ? CUDNN_FMA_MATH : math));
  };
  auto fail = [&]() -> ConvPlan& {
    throw DeviceError(std::string(op) + ": cuDNN has no " + (det ? "deterministic " : "") +
                      "algorithm for input " + describe(x) + ", weights " + describe(w) +
                      ", output " + describe(y) + ", groups " + std::to_string(g));
  };
  cudnnHandle_t hd = ctx_.cudnn;
  if (kind == ConvKind::forward) {
    int max_count = 0, got = 0;
    CONVOY_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(hd, &max_count));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> heur(max_count), found(max_count);
    CONVOY_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(hd, plan->x.d, plan->w.d, plan->conv.d,
                                                              plan->y.d, max_count, &got, heur.data()));
    size_t ws = 0;
    for (int i = 0; i < got; ++i)
      if (heur[i].status == CUDNN_STATUS_SUCCESS && heur[i].memory <= limit) ws = std::max(ws, heur[i].memory);
    int nfound = 0;
    // Without benchmarking, the heuristics' pick below.
    const cudnnStatus_t st = !ctx_.benchmark ? CUDNN_STATUS_NOT_SUPPORTED : cudnnFindConvolutionForwardAlgorithmEx(
        hd, plan->x.d, x_ptr, plan->w.d, w_ptr, plan->conv.d, plan->y.d, const_cast<void*>(y_ptr),
        max_count, &nfound, found.data(), conv_workspace_.get(ws), ws);
    const auto* best = st == CUDNN_STATUS_SUCCESS ? pick_algo(found, nfound, det, ws) : nullptr;
    if (!best) best = pick_algo(heur, got, det, limit);
    if (!best) return fail();
    finish(best->algo, best->mathType);
    CONVOY_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(hd, plan->x.d, plan->w.d, plan->conv.d,
                                                               plan->y.d, best->algo, &plan->workspace));
  } else if (kind == ConvKind::backward_data) {
    int max_count = 0, got = 0;
    CONVOY_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(hd, &max_count));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> heur(max_count), found(max_count);
    CONVOY_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        hd, plan->w.d, plan->y.d, plan->conv.d, plan->x.d, max_count, &got, heur.data()));
    size_t ws = 0;
    for (int i = 0; i < got; ++i)
      if (heur[i].status == CUDNN_STATUS_SUCCESS && heur[i].memory <= limit) ws = std::max(ws, heur[i].memory);
    int nfound = 0;
    // Without benchmarking, the heuristics' pick below.
    const cudnnStatus_t st = !ctx_.benchmark ? CUDNN_STATUS_NOT_SUPPORTED : cudnnFindConvolutionBackwardDataAlgorithmEx(
        hd, plan->w.d, w_ptr, plan->y.d, y_ptr, plan->conv.d, plan->x.d, const_cast<void*>(x_ptr),
        max_count, &nfound, found.data(), conv_workspace_.get(ws), ws);
    const auto* best = st == CUDNN_STATUS_SUCCESS ? pick_algo(found, nfound, det, ws) : nullptr;
    if (!best) best = pick_algo(heur, got, det, limit);
    if (!best) return fail();
    finish(best->algo, best->mathType);
    CONVOY_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
        hd, plan->w.d, plan->y.d, plan->conv.d, plan->x.d, best->algo, &plan->workspace));
  } else {
    int max_count = 0, got = 0;
    CONVOY_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(hd, &max_count));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> heur(max_count), found(max_count);
    CONVOY_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        hd, plan->x.d, plan->y.d, plan->conv.d, plan->w.d, max_count, &got, heur.data()));
    size_t ws = 0;
    for (int i = 0; i < got; ++i)
      if (heur[i].status == CUDNN_STATUS_SUCCESS && heur[i].memory <= limit) ws = std::max(ws, heur[i].memory);
    int nfound = 0;
    // Without benchmarking, the heuristics' pick below.
    const cudnnStatus_t st = !ctx_.benchmark ? CUDNN_STATUS_NOT_SUPPORTED : cudnnFindConvolutionBackwardFilterAlgorithmEx(
        hd, plan->x.d, x_ptr, plan->y.d, y_ptr, plan->conv.d, plan->w.d, const_cast<void*>(w_ptr),
        max_count, &nfound, found.data(), conv_workspace_.get(ws), ws);
    const auto* best = st == CUDNN_STATUS_SUCCESS ? pick_algo(found, nfound, det, ws) : nullptr;
    if (!best) best = pick_algo(heur, got, det, limit);
    if (!best) return fail();
    finish(best->algo, best->mathType);
    CONVOY_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        hd, plan->x.d, plan->y.d, plan->conv.d, plan->w.d, best->algo, &plan->workspace));
  }
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
  check_float(ctx_, x, "conv2d_forward", "x");
  check_float(ctx_, w, "conv2d_forward", "w");
  check_float(ctx_, y, "conv2d_forward", "y");
  if (const int64_t c = aligned_channels(p, x, w); c && w.ndim() == 4 && w.dim(1) == x.dim(1)) {
    conv2d_forward(p, padded_channels(x, c), padded_channels(w, c), b, y);
    return;
  }
  ConvPlan& plan = conv_plan(ConvKind::forward, p, x, w, y, x.raw(), w.raw(), y.raw());
  void* ws = conv_workspace_.get(plan.workspace);
  CONVOY_CUDNN_CHECK(cudnnConvolutionForward(ctx_.cudnn, &kOne, plan.x.d, x.raw(), plan.w.d, w.raw(),
                                             plan.conv.d, static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo),
                                             ws, plan.workspace, &kZero, plan.y.d, y.raw()));
  if (b.defined()) {
    check_float(ctx_, b, "conv2d_forward", "b");
    expect(b.numel() == y.dim(1), "conv2d_forward: bias " + describe(b) + " does not match output " + describe(y));
    const ChannelView v = channel_view(y);
    kernels::bias_add(dt_of(y.dtype()), y.raw(), dt_of(b.dtype()), b.raw(), v.outer, v.channels,
                      v.inner, ctx_.stream);
  }
}

void CudaOps::conv2d_backward_data(const Conv2dParams& p, const Tensor& dy, const Tensor& w,
                                   Tensor& dx) {
  check_float(ctx_, dy, "conv2d_backward_data", "dy");
  check_float(ctx_, w, "conv2d_backward_data", "w");
  check_float(ctx_, dx, "conv2d_backward_data", "dx");
  ConvPlan& plan = conv_plan(ConvKind::backward_data, p, dx, w, dy, dx.raw(), w.raw(), dy.raw());
  void* ws = conv_workspace_.get(plan.workspace);
  CONVOY_CUDNN_CHECK(cudnnConvolutionBackwardData(
      ctx_.cudnn, &kOne, plan.w.d, w.raw(), plan.y.d, dy.raw(), plan.conv.d,
      static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo), ws, plan.workspace, &kZero, plan.x.d,
      dx.raw()));
}

void CudaOps::conv2d_backward_weights(const Conv2dParams& p, const Tensor& x, const Tensor& dy,
                                      Tensor& dw, Tensor& db) {
  check_float(ctx_, x, "conv2d_backward_weights", "x");
  check_float(ctx_, dy, "conv2d_backward_weights", "dy");
  check_float(ctx_, dw, "conv2d_backward_weights", "dw");
  if (const int64_t c = aligned_channels(p, x, dw); c && dw.ndim() == 4 && dw.dim(1) == x.dim(1)) {
    Tensor padded_dw(Shape{dw.dim(0), c, dw.dim(2), dw.dim(3)}, dw.dtype(), ctx_.tensors, Layout::nhwc);
    conv2d_backward_weights(p, padded_channels(x, c), dy, padded_dw, db);
    kernels::copy_channels(static_cast<int>(dtype_size(dw.dtype())), /*to_y=*/false, dw.raw(), padded_dw.raw(),
                           dw.dim(0) * dw.dim(2) * dw.dim(3), dw.dim(1), c, 0, 1, ctx_.stream);
    return;
  }
  ConvPlan& plan = conv_plan(ConvKind::backward_filter, p, x, dw, dy, x.raw(), dw.raw(), dy.raw());
  void* ws = conv_workspace_.get(plan.workspace);
  CONVOY_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      ctx_.cudnn, &kOne, plan.x.d, x.raw(), plan.y.d, dy.raw(), plan.conv.d,
      static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo), ws, plan.workspace, &kZero, plan.w.d,
      dw.raw()));
  if (db.defined()) {
    check_float(ctx_, db, "conv2d_backward_weights", "db");
    expect(db.numel() == dy.dim(1), "conv2d_backward_weights: db " + describe(db) + " does not match dy " + describe(dy));
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
  check_float(ctx_, x, op, "x");
  check_float(ctx_, y, op, "y");
  check_like(x, y, op, "x", "y");
  const Dims4 d = dims4(x, op, "x");
  check_per_channel(ctx_, d.c, op, {{gamma, "gamma"}, {beta, "beta"}, {running_mean, "running_mean"},
                                    {running_var, "running_var"}, {saved_mean, "saved_mean"},
                                    {saved_invstd, "saved_invstd"}});
  expect(eps > 0.f, std::string(op) + ": eps must be positive");
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
  check_float(ctx_, x, op, "x");
  check_float(ctx_, y, op, "y");
  check_like(x, y, op, "x", "y");
  const Dims4 d = dims4(x, op, "x");
  check_per_channel(ctx_, d.c, op, {{gamma, "gamma"}, {beta, "beta"}, {running_mean, "running_mean"},
                                    {running_var, "running_var"}});
  expect(eps > 0.f, std::string(op) + ": eps must be positive");
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
  check_float(ctx_, x, op, "x");
  check_float(ctx_, dy, op, "dy");
  check_like(x, dy, op, "x", "dy");
  const Dims4 d = dims4(x, op, "x");
  check_per_channel(ctx_, d.c, op, {{gamma, "gamma"}, {saved_mean, "saved_mean"}, {saved_invstd, "saved_invstd"},
                                    {dgamma, "dgamma"}, {dbeta, "dbeta"}});
  if (dx.defined()) {
    check_here(ctx_, dx, op, "dx");
    check_like(x, dx, op, "x", "dx");
  }
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
  check_float(ctx_, x, "activation_forward", "x");
  check_here(ctx_, y, "activation_forward", "y");
  check_like(x, y, "activation_forward", "x", "y");
  kernels::activation_forward(kind, alpha, dt_of(x.dtype()), x.raw(), y.raw(), x.numel(),
                              ctx_.stream);
}

void CudaOps::activation_backward(Activation kind, float alpha, const Tensor& x, const Tensor& y,
                                  const Tensor& dy, Tensor& dx) {
  const char* op = "activation_backward";
  // relu and leaky relu (alpha > 0) have the sign of their input, so y serves as well as x.
  const bool y_will_do = kind == Activation::relu || (kind == Activation::leaky_relu && alpha > 0.f);
  const Tensor& in = x.defined() || !y_will_do ? x : y;
  check_float(ctx_, in, op, x.defined() || !y_will_do ? "x" : "y");
  check_here(ctx_, dy, op, "dy");
  check_here(ctx_, dx, op, "dx");
  check_like(in, dy, op, "x", "dy");
  check_like(in, dx, op, "x", "dx");
  kernels::activation_backward(kind, alpha, dt_of(in.dtype()), in.raw(), dy.raw(), dx.raw(),
                               in.numel(), ctx_.stream);
}

namespace {
kernels::PoolShape pool_shape(const Pool2dParams& p, const Tensor& x, const Tensor& y, const char* op) {
  expect(x.ndim() == 4 && y.ndim() == 4, std::string(op) + ": expected 4-D x and y, got " +
                                             describe(x) + ", " + describe(y));
  expect(p.kernel_h >= 1 && p.kernel_w >= 1 && p.stride_h >= 1 && p.stride_w >= 1 && p.pad_h >= 0 &&
             p.pad_w >= 0,
         std::string(op) + ": invalid kernel, stride or padding");
  kernels::PoolShape s{};
  s.n = x.dim(0); s.c = x.dim(1); s.h = x.dim(2); s.w = x.dim(3);
  s.p = (s.h + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1;
  s.q = (s.w + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1;
  expect(y.dim(0) == s.n && y.dim(1) == s.c && y.dim(2) == s.p && y.dim(3) == s.q,
         std::string(op) + ": output " + describe(y) + " should be " +
             shape_str({s.n, s.c, s.p, s.q}) + " for input " + describe(x));
  expect(x.dtype() == y.dtype() && x.layout() == y.layout(),
         std::string(op) + ": x " + describe(x) + " and y " + describe(y) + " must share dtype and layout");
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
  check_float(ctx_, x, "pool2d_forward", "x");
  check_here(ctx_, y, "pool2d_forward", "y");
  const kernels::PoolShape s = pool_shape(p, x, y, "pool2d_forward");
  // Backward finds each window's maximum again from x, so no workspace is kept.
  kernels::pool2d_forward(s, dt_of(x.dtype()), x.raw(), y.raw(), ctx_.stream);
}

void CudaOps::pool2d_backward(const Pool2dParams& p, const Tensor& x, const Tensor& y,
                              const Tensor& dy, const Tensor& workspace, Tensor& dx) {
  check_float(ctx_, x, "pool2d_backward", "x");
  check_here(ctx_, dy, "pool2d_backward", "dy");
  check_here(ctx_, dx, "pool2d_backward", "dx");
  check_like(x, dx, "pool2d_backward", "x", "dx");
  const kernels::PoolShape s = pool_shape(p, x, dy, "pool2d_backward");
  kernels::pool2d_backward(s, dt_of(x.dtype()), x.raw(), dy.raw(), dx.raw(), ctx_.stream);
}

// ---- linear ---------------------------------------------------------------------------------
// Row-major (N, K) x (M, K)^T is, seen column-major, y^T (M x N) = w^T-as-stored (K x M)^T . x^T (K x N).

void CudaOps::linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  const char* op = "linear_forward";
  check_float(ctx_, x, op, "x");
  check_float(ctx_, w, op, "w");
  check_float(ctx_, y, op, "y");
  expect(x.ndim() == 2 && w.ndim() == 2 && y.ndim() == 2 && w.dim(1) == x.dim(1) &&
             y.dim(0) == x.dim(0) && y.dim(1) == w.dim(0),
         std::string(op) + ": expected x (N, K), w (M, K), y (N, M), got " + describe(x) + ", " +
             describe(w) + ", " + describe(y));
  expect(x.dtype() == w.dtype() && x.dtype() == y.dtype(),
         std::string(op) + ": x, w and y must share one dtype");
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
    check_float(ctx_, b, op, "b");
    expect(b.numel() == m, std::string(op) + ": bias " + describe(b) + " does not match w " + describe(w));
    kernels::bias_add(dt_of(y.dtype()), y.raw(), dt_of(b.dtype()), b.raw(), n, m, 1, ctx_.stream);
  }
}

void CudaOps::linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
                              Tensor& dw, Tensor& db) {
  const char* op = "linear_backward";
  check_float(ctx_, x, op, "x");
  check_float(ctx_, w, op, "w");
  check_float(ctx_, dy, op, "dy");
  check_float(ctx_, dw, op, "dw");
  expect(x.ndim() == 2 && w.ndim() == 2 && dy.ndim() == 2 && w.dim(1) == x.dim(1) &&
             dy.dim(0) == x.dim(0) && dy.dim(1) == w.dim(0),
         std::string(op) + ": expected x (N, K), w (M, K), dy (N, M), got " + describe(x) + ", " +
             describe(w) + ", " + describe(dy));
  check_like(w, dw, op, "w", "dw");
  expect(x.dtype() == w.dtype() && x.dtype() == dy.dtype(), std::string(op) + ": x, w and dy must share one dtype");
  const int n = to_int(x.dim(0), "N"), k = to_int(x.dim(1), "K"), m = to_int(w.dim(0), "M");
  const cudaDataType_t t = cublas_type(x.dtype());
  if (dx.defined()) {
    check_here(ctx_, dx, op, "dx");
    check_like(x, dx, op, "x", "dx");
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
    check_float(ctx_, db, op, "db");
    expect(db.numel() == m, std::string(op) + ": db " + describe(db) + " does not match dy " + describe(dy));
    void* scratch = scratch_.get(kernels::bias_grad_scratch_bytes(n, m, 1));
    kernels::bias_grad(dt_of(dy.dtype()), dy.raw(), dt_of(db.dtype()), db.raw(), n, m, 1, scratch,
                         ctx_.stream);
  }
}

// ---- adds, concat, split, dropout -----------------------------------------------------------

void CudaOps::add(const Tensor& a, const Tensor& b, Tensor& y) {
  check_float(ctx_, a, "add", "a");
  check_here(ctx_, b, "add", "b");
  check_here(ctx_, y, "add", "y");
  check_like(a, b, "add", "a", "b");
  check_like(a, y, "add", "a", "y");
  kernels::add(dt_of(a.dtype()), a.raw(), b.raw(), y.raw(), a.numel(), ctx_.stream);
}

void CudaOps::add_inplace(Tensor& y, const Tensor& x) {
  check_float(ctx_, y, "add_inplace", "y");
  check_here(ctx_, x, "add_inplace", "x");
  check_like(y, x, "add_inplace", "y", "x");
  kernels::add_inplace(dt_of(y.dtype()), y.raw(), x.raw(), y.numel(), ctx_.stream);
}

namespace {
// Checks that xs stack along dimension 1 into y; returns the (outer, inner) of y's view.
ChannelView check_concat(const CudaContext& ctx, std::span<const Tensor* const> xs, const Tensor& y,
                         const char* op) {
  check_here(ctx, y, op, "y");
  expect(y.ndim() >= 2, std::string(op) + ": y must have a channel dimension, got " + describe(y));
  int64_t channels = 0;
  for (const Tensor* x : xs) {
    check_here(ctx, *x, op, "input");
    bool ok = x->ndim() == y.ndim() && x->dtype() == y.dtype() && x->layout() == y.layout();
    for (int i = 0; ok && i < y.ndim(); ++i) ok = i == 1 || x->dim(i) == y.dim(i);
    expect(ok, std::string(op) + ": " + describe(*x) + " does not stack along channels into " + describe(y));
    channels += x->dim(1);
  }
  expect(channels == y.dim(1), std::string(op) + ": the inputs' channels add up to " +
                                   std::to_string(channels) + ", not " + describe(y));
  return channel_view(y);
}
}  // namespace

void CudaOps::concat_channels(std::span<const Tensor> xs, Tensor& y) {
  std::vector<const Tensor*> ptrs;
  for (const Tensor& x : xs) ptrs.push_back(&x);
  const ChannelView v = check_concat(ctx_, ptrs, y, "concat_channels");
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
  const ChannelView v = check_concat(ctx_, ptrs, y, "split_channels");
  int64_t offset = 0;
  for (Tensor& x : xs) {
    kernels::copy_channels(static_cast<int>(dtype_size(x.dtype())), false, x.raw(),
                           const_cast<void*>(y.raw()), v.outer, x.dim(1), v.channels, offset,
                           v.inner, ctx_.stream);
    offset += x.dim(1);
  }
}

void CudaOps::dropout_forward(float p, uint64_t seed, const Tensor& x, Tensor& y) {
  check_float(ctx_, x, "dropout_forward", "x");
  check_here(ctx_, y, "dropout_forward", "y");
  check_like(x, y, "dropout_forward", "x", "y");
  expect(p >= 0.f && p <= 1.f, "dropout_forward: p must lie in [0, 1], got " + std::to_string(p));
  kernels::dropout(dt_of(x.dtype()), p, seed, x.raw(), y.raw(), x.numel(), ctx_.stream);
}

void CudaOps::dropout_backward(float p, uint64_t seed, const Tensor& dy, Tensor& dx) {
  check_float(ctx_, dy, "dropout_backward", "dy");
  check_here(ctx_, dx, "dropout_backward", "dx");
  check_like(dy, dx, "dropout_backward", "dy", "dx");
  expect(p >= 0.f && p <= 1.f, "dropout_backward: p must lie in [0, 1], got " + std::to_string(p));
  kernels::dropout(dt_of(dy.dtype()), p, seed, dy.raw(), dx.raw(), dy.numel(), ctx_.stream);
}

// ---- softmax, losses ------------------------------------------------------------------------

void CudaOps::softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float smoothing,
                                    Tensor& loss, Tensor& dlogits, Tensor& correct) {
  const char* op = "softmax_cross_entropy";
  check_float(ctx_, logits, op, "logits");
  expect(logits.ndim() == 2 && logits.layout() == Layout::nchw,
         std::string(op) + ": logits must be (N, C), got " + describe(logits));
  const int64_t n = logits.dim(0), c = logits.dim(1);
  check_here(ctx_, labels, op, "labels");
  expect(labels.dtype() == DType::i32 && labels.numel() == n,
         std::string(op) + ": labels must be (N) I32, got " + describe(labels));
  check_f32(ctx_, loss, 1, op, "loss");
  if (dlogits.defined()) {
    check_here(ctx_, dlogits, op, "dlogits");
    check_like(logits, dlogits, op, "logits", "dlogits");
  }
  if (correct.defined()) {
    check_here(ctx_, correct, op, "correct");
    expect(correct.dtype() == DType::i32 && correct.numel() == 1,
           std::string(op) + ": correct must be (1) I32, got " + describe(correct));
  }
  expect(n > 0 && c > 0, std::string(op) + ": empty logits " + describe(logits));
  void* scratch = scratch_.get(kernels::softmax_cross_entropy_scratch_bytes(n));
  kernels::softmax_cross_entropy(dt_of(logits.dtype()), logits.raw(), labels.data<int32_t>(),
                                 smoothing, loss.data<float>(),
                                 dlogits.defined() ? dlogits.raw() : nullptr,
                                 correct.defined() ? correct.data<int32_t>() : nullptr, n, c,
                                 scratch, ctx_.stream);
}

void CudaOps::softmax(const Tensor& logits, Tensor& probs) {
  check_float(ctx_, logits, "softmax", "logits");
  check_here(ctx_, probs, "softmax", "probs");
  expect(logits.ndim() == 2 && probs.shape() == logits.shape() && probs.dtype() == DType::f32,
         "softmax: expected logits (N, C) and probs (N, C) F32, got " + describe(logits) + ", " +
             describe(probs));
  kernels::softmax(dt_of(logits.dtype()), logits.raw(), probs.data<float>(), logits.dim(0),
                   logits.dim(1), ctx_.stream);
}

// ---- cast, fill -----------------------------------------------------------------------------

void CudaOps::cast(const Tensor& x, Tensor& y) {
  check_float(ctx_, x, "cast", "x");
  check_float(ctx_, y, "cast", "y");
  expect(x.shape() == y.shape() && (x.layout() == y.layout() || x.ndim() == 4),
         "cast: x " + describe(x) + " and y " + describe(y) + " must have the same shape, and the same " +
             "layout unless 4-D");
  if (!same_memory_order(x, y)) {
    kernels::cast_layout(dt_of(x.dtype()), x.raw(), dt_of(y.dtype()), y.raw(), x.dim(0), x.dim(1),
                         x.dim(2) * x.dim(3), y.layout() == Layout::nhwc, ctx_.stream);
    return;
  }
  kernels::cast(dt_of(x.dtype()), x.raw(), dt_of(y.dtype()), y.raw(), x.numel(), ctx_.stream);
}

void CudaOps::fill(Tensor& y, float value) {
  check_here(ctx_, y, "fill", "y");
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
  const char* op = "sgd_update";
  std::vector<kernels::SgdSlotDev> dev;
  for (const SgdSlot& s : slots) {
    expect(s.param && s.grad, std::string(op) + ": a slot without param or grad");
    const int64_t n = s.param->numel();
    check_f32(ctx_, *s.param, n, op, "param");
    check_f32(ctx_, *s.grad, n, op, "grad");
    float* buf = nullptr;
    const bool has_buf = s.momentum_buf && s.momentum_buf->defined();
    expect(has_buf || h.momentum == 0.f, std::string(op) + ": momentum needs a momentum buffer");
    if (has_buf) {
      check_f32(ctx_, *s.momentum_buf, n, op, "momentum_buf");
      buf = s.momentum_buf->data<float>();
    }
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
  const char* op = "adamw_update";
  expect(h.step >= 1, std::string(op) + ": step must be at least 1");
  std::vector<kernels::AdamSlotDev> dev;
  for (const AdamSlot& s : slots) {
    expect(s.param && s.grad && s.m && s.v, std::string(op) + ": a slot without param, grad, m or v");
    const int64_t n = s.param->numel();
    check_f32(ctx_, *s.param, n, op, "param");
    check_f32(ctx_, *s.grad, n, op, "grad");
    check_f32(ctx_, *s.m, n, op, "m");
    check_f32(ctx_, *s.v, n, op, "v");
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
  const char* op = "normalize_augment";
  check_here(ctx_, images, op, "images");
  check_float(ctx_, y, op, "y");
  expect(images.dtype() == DType::u8 && images.ndim() == 4 && images.layout() == Layout::nchw,
         std::string(op) + ": images must be (N, C, H, W) U8 nchw, got " + describe(images));
  expect(y.shape() == images.shape(), std::string(op) + ": y " + describe(y) + " must have the images' shape " +
                                          shape_str(images.shape()));
  expect(images.dim(1) <= 4, std::string(op) + ": at most 4 channels, got " + describe(images));
  expect(a.crop_padding >= 0, std::string(op) + ": crop_padding must not be negative");
  for (int64_t ch = 0; ch < images.dim(1); ++ch)
    expect(a.std[ch] != 0.f, std::string(op) + ": std of channel " + std::to_string(ch) + " is 0");
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
