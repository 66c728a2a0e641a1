// Probe for issue 37 (GPU int8/FP8 inference): which 8-bit convolution paths exist on this GPU and
// cuDNN, and how fast each runs ResNet-50's convolutions next to bf16, before the engine commits
// to one. For each of ResNet-50's 52 body convolutions (NHWC, batch 256 and 1) it times:
//   cudnn bf16: x, w, y bf16; conv -> + bias -> ReLU in one plan (what the engine runs today)
//   cudnn fp8:  x, w e4m3; conv -> * per-channel scale -> + bias -> ReLU -> y e4m3
//   cudnn int8: x, w int8; the same epilogue -> y int8
//   lt bf16 / lt fp8 / lt int8: the 1x1 stride-1 ones as cuBLASLt matmuls with a bias + ReLU
//       epilogue (fp8: per-tensor scales, the output e4m3; int8: a per-row alpha vector)
// cuDNN engines that compile at run time (NVRTC) are allowed here and reported, with their build
// time. Prints one line per case and the network's sum per variant (conv time per image).
// Standalone on purpose (one g++ call, no engine build): its descriptor helpers are shaped like
// engine/backends/cuda/cudnn_graph_conv.cpp's, which cannot yet build 8-bit graphs.
//   g++ -O2 -std=c++17 probe_8bit.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 \
//       -lcudnn -lcublasLt -lcudart -o probe_8bit && ./probe_8bit [seconds_budget]
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { std::printf("cuda %s at %d\n", cudaGetErrorString(e_), __LINE__); std::exit(1); } } while (0)

using Clock = std::chrono::steady_clock;
static double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) { ok_ = cudnnBackendCreateDescriptor(type, &d_) == CUDNN_STATUS_SUCCESS; }
  ~Desc() { if (d_) cudnnBackendDestroyDescriptor(d_); }
  cudnnBackendDescriptor_t get() const { return d_; }
  Desc& set(cudnnBackendAttributeName_t n, cudnnBackendAttributeType_t t, int64_t c, const void* v) {
    if (cudnnBackendSetAttribute(d_, n, t, c, v) != CUDNN_STATUS_SUCCESS) ok_ = false;
    return *this;
  }
  Desc& set(cudnnBackendAttributeName_t n, const Desc& o) { auto p = o.get(); return set(n, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p); }
  bool finalize() { return ok_ && cudnnBackendFinalize(d_) == CUDNN_STATUS_SUCCESS; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  bool ok_ = true;
};
using DescP = std::unique_ptr<Desc>;

struct Conv { const char* name; int h, w, c, k, r, stride, count; };
// ResNet-50 v1.5 at 224x224 (stride on the 3x3), input sizes; count = how many in the network.
static const Conv kConvs[] = {
    {"l1 1x1 64-64", 56, 56, 64, 64, 1, 1, 1},      {"l1 1x1 256-64", 56, 56, 256, 64, 1, 1, 2},
    {"l1 3x3 64", 56, 56, 64, 64, 3, 1, 3},          {"l1 1x1 64-256", 56, 56, 64, 256, 1, 1, 4},
    {"l2 1x1 256-128", 56, 56, 256, 128, 1, 1, 1},  {"l2 3x3 128 s2", 56, 56, 128, 128, 3, 2, 1},
    {"l2 1x1 128-512", 28, 28, 128, 512, 1, 1, 4},  {"l2 ds 256-512 s2", 56, 56, 256, 512, 1, 2, 1},
    {"l2 1x1 512-128", 28, 28, 512, 128, 1, 1, 3},  {"l2 3x3 128", 28, 28, 128, 128, 3, 1, 3},
    {"l3 1x1 512-256", 28, 28, 512, 256, 1, 1, 1},  {"l3 3x3 256 s2", 28, 28, 256, 256, 3, 2, 1},
    {"l3 1x1 256-1024", 14, 14, 256, 1024, 1, 1, 6}, {"l3 ds 512-1024 s2", 28, 28, 512, 1024, 1, 2, 1},
    {"l3 1x1 1024-256", 14, 14, 1024, 256, 1, 1, 5}, {"l3 3x3 256", 14, 14, 256, 256, 3, 1, 5},
    {"l4 1x1 1024-512", 14, 14, 1024, 512, 1, 1, 1}, {"l4 3x3 512 s2", 14, 14, 512, 512, 3, 2, 1},
    {"l4 1x1 512-2048", 7, 7, 512, 2048, 1, 1, 3},  {"l4 ds 1024-2048 s2", 14, 14, 1024, 2048, 1, 2, 1},
    {"l4 1x1 2048-512", 7, 7, 2048, 512, 1, 1, 2},  {"l4 3x3 512", 7, 7, 512, 512, 3, 1, 2},
};

enum class Kind { bf16, fp8, int8 };
static const char* kind_name(Kind k) { return k == Kind::bf16 ? "bf16" : k == Kind::fp8 ? "fp8" : "int8"; }
static cudnnDataType_t io_type(Kind k) {
  return k == Kind::bf16 ? CUDNN_DATA_BFLOAT16 : k == Kind::fp8 ? CUDNN_DATA_FP8_E4M3 : CUDNN_DATA_INT8;
}

static DescP tensor(int64_t uid, cudnnDataType_t type, std::array<int64_t, 4> d, bool nhwc, bool virt) {
  const int64_t c = d[1], h = d[2], w = d[3];
  std::array<int64_t, 4> st = nhwc ? std::array<int64_t, 4>{c * h * w, 1, w * c, c} : std::array<int64_t, 4>{c * h * w, h * w, w, 1};
  const int64_t align = 16;
  auto t = std::make_unique<Desc>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  t->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, d.data())
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, st.data())
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid)
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
  if (virt) { bool y = true; t->set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &y); }
  if (!t->finalize()) return nullptr;
  return t;
}

template <class Note>
static bool has_note(cudnnBackendDescriptor_t engine, cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, Note n) {
  Note notes[32]; int64_t c = 0;
  if (cudnnBackendGetAttribute(engine, a, t, 32, &c, notes) != CUDNN_STATUS_SUCCESS) return false;
  return std::find(notes, notes + std::min<int64_t>(c, 32), n) != notes + std::min<int64_t>(c, 32);
}

struct Buffers { void *x, *w, *y, *res, *c16, *scale, *bias, *ws; size_t ws_bytes; };

// Times `run` (already warmed once): median of 5 groups of 10 runs, ms per run.
template <class F>
static float time_ms(F run) {
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  std::vector<float> v;
  for (int g = 0; g < 5; ++g) {
    CK(cudaEventRecord(a));
    for (int i = 0; i < 10; ++i) if (!run()) return -1;
    CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
    float ms = 0; CK(cudaEventElapsedTime(&ms, a, b)); v.push_back(ms / 10);
  }
  cudaEventDestroy(a); cudaEventDestroy(b);
  std::sort(v.begin(), v.end());
  return v[2];
}

struct Result { float ms = -1; bool rtc = false; double build_s = 0; int tried = 0; std::string note; };

static Result cudnn_case(cudnnHandle_t h, Kind kind, int n, const Conv& cv, const Buffers& buf, bool residual = false) {
  Result res;
  const int64_t p = cv.r / 2, oh = (cv.h + 2 * p - cv.r) / cv.stride + 1, ow = (cv.w + 2 * p - cv.r) / cv.stride + 1;
  std::vector<DescP> kept;
  auto keep = [&](DescP d) -> Desc* { if (!d) return nullptr; kept.push_back(std::move(d)); return kept.back().get(); };
  const cudnnDataType_t t = io_type(kind);
  Desc* tx = keep(tensor(1, t, {n, cv.c, cv.h, cv.w}, true, false));
  Desc* tw = keep(tensor(2, t, {cv.k, cv.c, cv.r, cv.r}, true, false));
  Desc* ty = keep(tensor(3, t, {n, cv.k, oh, ow}, true, false));
  Desc* tscale = keep(tensor(4, CUDNN_DATA_FLOAT, {1, cv.k, 1, 1}, true, false));
  Desc* tbias = keep(tensor(5, CUDNN_DATA_FLOAT, {1, cv.k, 1, 1}, true, false));
  Desc* v0 = keep(tensor(10, CUDNN_DATA_FLOAT, {n, cv.k, oh, ow}, true, true));
  Desc* v1 = keep(tensor(11, CUDNN_DATA_FLOAT, {n, cv.k, oh, ow}, true, true));
  Desc* v2 = keep(tensor(12, CUDNN_DATA_FLOAT, {n, cv.k, oh, ow}, true, true));
  Desc* v3 = keep(tensor(13, CUDNN_DATA_FLOAT, {n, cv.k, oh, ow}, true, true));
  Desc* v4 = keep(tensor(14, CUDNN_DATA_FLOAT, {n, cv.k, oh, ow}, true, true));
  Desc* tres = keep(tensor(6, t, {n, cv.k, oh, ow}, true, false));
  Desc* trscale = keep(tensor(7, CUDNN_DATA_FLOAT, {1, cv.k, 1, 1}, true, false));
  if (!tx || !tw || !ty || !tscale || !tbias || !v0 || !v1 || !v2) { res.note = "tensor descriptor refused"; return res; }
  Desc* conv = keep(std::make_unique<Desc>(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR));
  const cudnnDataType_t comp = kind == Kind::int8 ? CUDNN_DATA_INT32 : CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2; std::array<int64_t, 2> pad{p, p}, str{cv.stride, cv.stride}, dil{1, 1};
  conv->set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp)
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)
      .set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims)
      .set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil.data())
      .set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, str.data())
      .set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad.data())
      .set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad.data());
  if (!conv->finalize()) { res.note = "conv descriptor refused"; return res; }
  const float alpha = 1, beta = 0;
  Desc* op = keep(std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR));
  op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, *tx).set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, *tw)
      .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, *v0).set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, *conv)
      .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha)
      .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
  if (!op->finalize()) { res.note = "conv op refused"; return res; }
  std::vector<cudnnBackendDescriptor_t> ops{op->get()};
  // bf16: + bias, ReLU (the scale is 1 there and folded into the weights). 8-bit: * scale first.
  struct Step { cudnnPointwiseMode_t m; Desc* b; Desc* in; Desc* out; };
  std::vector<Step> steps;
  // residual: bf16 adds it as it is; 8-bit scales it by its own per-channel scale first (a second
  // input read in the same kernel), the sum then ReLU.
  if (kind == Kind::bf16 && !residual) steps = {{CUDNN_POINTWISE_ADD, tbias, v0, v1}, {CUDNN_POINTWISE_RELU_FWD, nullptr, v1, ty}};
  else if (kind == Kind::bf16) steps = {{CUDNN_POINTWISE_ADD, tbias, v0, v1}, {CUDNN_POINTWISE_ADD, tres, v1, v2}, {CUDNN_POINTWISE_RELU_FWD, nullptr, v2, ty}};
  else if (!residual) steps = {{CUDNN_POINTWISE_MUL, tscale, v0, v1}, {CUDNN_POINTWISE_ADD, tbias, v1, v2}, {CUDNN_POINTWISE_RELU_FWD, nullptr, v2, ty}};
  else steps = {{CUDNN_POINTWISE_MUL, tscale, v0, v1}, {CUDNN_POINTWISE_ADD, tbias, v1, v2},
                {CUDNN_POINTWISE_MUL, trscale, tres, v3}, {CUDNN_POINTWISE_ADD, v3, v2, v4}, {CUDNN_POINTWISE_RELU_FWD, nullptr, v4, ty}};
  for (auto& s : steps) {
    Desc* pw = keep(std::make_unique<Desc>(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
    const cudnnDataType_t math = CUDNN_DATA_FLOAT;
    pw->set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &s.m).set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math);
    if (!pw->finalize()) { res.note = "pointwise refused"; return res; }
    Desc* node = keep(std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
    node->set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, *pw).set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, *s.in)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, *s.out);
    if (s.b) node->set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *s.b);
    if (!node->finalize()) { res.note = "pointwise op refused"; return res; }
    ops.push_back(node->get());
  }
  Desc* graph = keep(std::make_unique<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
  graph->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, (int64_t)ops.size(), ops.data())
      .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  if (!graph->finalize()) { res.note = "graph refused"; return res; }

  std::vector<int64_t> uids{1, 2, 3, 5};
  std::vector<void*> ptrs{buf.x, buf.w, buf.y, buf.bias};
  if (kind != Kind::bf16) uids.push_back(4), ptrs.push_back(buf.scale);
  if (residual) uids.push_back(6), ptrs.push_back(buf.res);
  if (residual && kind != Kind::bf16) uids.push_back(7), ptrs.push_back(buf.scale);
  int candidates = 0;
  for (cudnnBackendHeurMode_t hm : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, *graph).set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm);
    if (!heur.finalize()) continue;
    int64_t count = 0;
    if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr)) continue;
    count = std::min<int64_t>(count, 16);
    std::vector<DescP> cfgs; std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) { cfgs.push_back(std::make_unique<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)); raw.push_back(cfgs.back()->get()); }
    int64_t got = 0;
    if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data())) continue;
    for (int64_t i = 0; i < got && candidates < 10; ++i) {
      Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR); int64_t one = 0; auto e = engine.get();
      if (cudnnBackendGetAttribute(raw[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &one, &e)) continue;
      const bool rtc = has_note(e, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION);
      const auto t0 = Clock::now();
      Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h).set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw[i]);
      if (!plan.finalize()) continue;
      const double build = seconds_since(t0);
      int64_t ws = 0;
      cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &one, &ws);
      if ((size_t)ws > buf.ws_bytes) continue;
      ++candidates;
      Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
      void* wsp = buf.ws;
      pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, (int64_t)uids.size(), uids.data())
          .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, (int64_t)ptrs.size(), ptrs.data())
          .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &wsp);
      if (!pack.finalize()) continue;
      auto run = [&] { return cudnnBackendExecute(h, plan.get(), pack.get()) == CUDNN_STATUS_SUCCESS; };
      if (!run() || cudaDeviceSynchronize() != cudaSuccess) { cudaGetLastError(); continue; }
      const float ms = time_ms(run);
      res.tried++;
      if (ms > 0 && (res.ms < 0 || ms < res.ms)) { res.ms = ms; res.rtc = rtc; res.build_s = build; }
    }
  }
  if (res.ms < 0 && res.note.empty()) res.note = "no engine";
  return res;
}

// A 1x1 stride-1 convolution, NHWC, as D(K x M, column-major) = W^T(K x C) * X(C x M): what
// cuBLASLt's FP8 kernels want (A transposed, "TN"). Epilogue: bias + ReLU per output channel.
static Result lt_case(cublasLtHandle_t lt, Kind kind, int n, const Conv& cv, const Buffers& buf, bool epilogue = true) {
  Result res;
  const int64_t M = (int64_t)n * cv.h * cv.w, K = cv.k, C = cv.c;
  const cudaDataType_t t = kind == Kind::bf16 ? CUDA_R_16BF : kind == Kind::fp8 ? CUDA_R_8F_E4M3 : CUDA_R_8I;
  const cublasComputeType_t comp = kind == Kind::int8 ? CUBLAS_COMPUTE_32I : CUBLAS_COMPUTE_32F;
  cublasLtMatmulDesc_t op = nullptr;
  if (cublasLtMatmulDescCreate(&op, comp, CUDA_R_32F)) { res.note = "desc refused"; return res; }
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  cublasLtEpilogue_t epi = epilogue ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  if (cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi)) res.note += "no epilogue; ";
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &buf.bias, sizeof buf.bias);
  cudaDataType_t bias_t = kind == Kind::int8 ? CUDA_R_32F : CUDA_R_16BF;
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_t, sizeof bias_t);
  float alpha = 0.01f, beta = 0;
  const void* alpha_ptr = &alpha;
  if (kind == Kind::fp8) {
    // Per-tensor scales (the outer-vector mode is tried below); scale D = the output's.
    for (auto a : {CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER})
      cublasLtMatmulDescSetAttribute(op, a, &buf.scale, sizeof buf.scale);
  }
  if (kind == Kind::int8) {
    cublasLtPointerMode_t pm = CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO;
    if (cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm)) res.note += "no alpha vector; ";
    else alpha_ptr = buf.scale;
  }
  cublasLtMatrixLayout_t la, lb, ld;
  cublasLtMatrixLayoutCreate(&la, t, C, K, C);
  cublasLtMatrixLayoutCreate(&lb, t, C, M, C);
  cublasLtMatrixLayoutCreate(&ld, t, K, M, K);
  cublasLtMatrixLayout_t lc = ld;
  cublasLtMatrixLayout_t lc16 = nullptr;
  if (kind == Kind::fp8) { cublasLtMatrixLayoutCreate(&lc16, CUDA_R_16BF, K, M, K); lc = lc16; }  // C must be bf16 for fp8 D
  cublasLtMatmulPreference_t pref; cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &buf.ws_bytes, sizeof buf.ws_bytes);
  cublasLtMatmulHeuristicResult_t heur[4]; int got = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, ld, pref, 4, heur, &got);
  if (st != CUBLAS_STATUS_SUCCESS || got == 0) res.note += "no algorithm (status " + std::to_string(st) + ")";
  for (int i = 0; i < got; ++i) {
    auto run = [&] {
      return cublasLtMatmul(lt, op, alpha_ptr, buf.w, la, buf.x, lb, &beta, kind == Kind::fp8 ? buf.c16 : buf.y, lc, buf.y, ld, &heur[i].algo, buf.ws, buf.ws_bytes, 0) == CUBLAS_STATUS_SUCCESS;
    };
    if (!run() || cudaDeviceSynchronize() != cudaSuccess) { cudaGetLastError(); continue; }
    const float ms = time_ms(run);
    res.tried++;
    if (ms > 0 && (res.ms < 0 || ms < res.ms)) res.ms = ms;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la); cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(ld);
  if (lc16) cublasLtMatrixLayoutDestroy(lc16);
  cublasLtMatmulDescDestroy(op);
  if (res.ms < 0 && epilogue) {  // what it can do without the fused bias + ReLU
    Result plain = lt_case(lt, kind, n, cv, buf, false);
    plain.note = "WITHOUT bias/ReLU epilogue; " + res.note + " | " + plain.note;
    return plain;
  }
  return res;
}

int main(int argc, char** argv) {
  const double budget = argc > 1 ? std::atof(argv[1]) : 420;
  const auto start = Clock::now();
  cudnnHandle_t h; cudnnCreate(&h);
  cublasLtHandle_t lt; cublasLtCreate(&lt);
  std::printf("cuDNN %zu, cuBLASLt %zu\n", cudnnGetVersion(), cublasLtGetVersion());
  // Buffers big enough for every case at batch 256 (largest tensor: 256 x 56 x 56 x 256 x 2 B).
  const size_t big = 256ull * 56 * 56 * 256 * 2, ws_bytes = 256ull << 20;
  Buffers buf{};
  CK(cudaMalloc(&buf.x, big)); CK(cudaMalloc(&buf.w, 2048ull * 1024 * 9 * 2)); CK(cudaMalloc(&buf.y, big)); CK(cudaMalloc(&buf.res, big)); CK(cudaMalloc(&buf.c16, big));
  CK(cudaMalloc(&buf.scale, 4096 * 4)); CK(cudaMalloc(&buf.bias, 4096 * 4)); CK(cudaMalloc(&buf.ws, ws_bytes));
  buf.ws_bytes = ws_bytes;
  // Values that are finite in every type: bytes of small e4m3 numbers (exponent field < 8) that
  // are also int8 in [-64, 63], and bf16 halves of the same pattern read as 16 bits (finite).
  {
    std::vector<uint8_t> host(big); std::mt19937 rng(1);
    for (auto& b : host) b = static_cast<uint8_t>((rng() & 0x3f) | ((rng() & 1) << 7));
    CK(cudaMemcpy(buf.x, host.data(), big, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(buf.res, host.data(), big, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(buf.w, host.data(), 2048ull * 1024 * 9 * 2, cudaMemcpyHostToDevice));
    std::vector<float> s(4096, 0.01f);
    CK(cudaMemcpy(buf.scale, s.data(), s.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(buf.bias, s.data(), s.size() * 4, cudaMemcpyHostToDevice));
  }
  std::map<std::string, double> total;  // "batch variant" -> ms per forward, network-weighted
  std::map<std::string, int> missing;
  for (int n : {256, 1}) {
    for (const Conv& cv : kConvs) {
      for (Kind kind : {Kind::bf16, Kind::fp8, Kind::int8}) {
        if (seconds_since(start) > budget) { std::printf("budget of %.0f s spent; stopping\n", budget); goto done; }
        Result r = cudnn_case(h, kind, n, cv, buf);
        std::printf("b%-3d %-20s cudnn %-4s %8.4f ms  tried %d%s build %.2fs %s\n", n, cv.name, kind_name(kind), r.ms,
                    r.tried, r.rtc ? " RTC" : "", r.build_s, r.note.c_str());
        std::fflush(stdout);
        const std::string key = "b" + std::to_string(n) + " cudnn " + kind_name(kind);
        if (r.ms > 0) total[key] += r.ms * cv.count; else missing[key] += cv.count;
        if (cv.r == 1 && cv.stride == 1 && cv.k == 4 * cv.c) {
          Result rr = cudnn_case(h, kind, n, cv, buf, true);
          std::printf("b%-3d %-20s cudnn %-4s %8.4f ms  tried %d%s build %.2fs +residual %s\n", n, cv.name, kind_name(kind), rr.ms,
                      rr.tried, rr.rtc ? " RTC" : "", rr.build_s, rr.note.c_str());
          const std::string rk = "b" + std::to_string(n) + " cudnn+res " + kind_name(kind);
          if (rr.ms > 0) total[rk] += rr.ms * cv.count; else missing[rk] += cv.count;
        }
        if (cv.r == 1 && cv.stride == 1) {
          Result l = lt_case(lt, kind, n, cv, buf);
          std::printf("b%-3d %-20s lt    %-4s %8.4f ms  tried %d %s\n", n, cv.name, kind_name(kind), l.ms, l.tried, l.note.c_str());
          const std::string lk = "b" + std::to_string(n) + " best-of " + kind_name(kind);
          const float best = (r.ms > 0 && (l.ms < 0 || r.ms < l.ms)) ? r.ms : l.ms;
          if (best > 0) total[lk] += best * cv.count; else missing[lk] += cv.count;
        } else {
          const std::string lk = "b" + std::to_string(n) + " best-of " + kind_name(kind);
          if (r.ms > 0) total[lk] += r.ms * cv.count; else missing[lk] += cv.count;
        }
      }
    }
  }
done:
  std::printf("\nsum of the 52 body convolutions per forward (ms; per image at b256 divide by 256):\n");
  for (auto& [k, v] : total) std::printf("  %-20s %9.4f ms%s\n", k.c_str(), v, missing[k] ? (" (" + std::to_string(missing[k]) + " convs missing)").c_str() : "");
  return 0;
}
