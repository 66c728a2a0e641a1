#include "engine/backends/cuda/cudnn_graph_conv.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backends/cuda/cudnn_cublas_check.h"
#include "engine/backends/cuda/cuda_ops_internal.h"

namespace convoy::cuda {

namespace {

// One backend descriptor, destroyed with its owner.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) { CONVOY_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d_)); }
  ~Desc() { if (d_) cudnnBackendDestroyDescriptor(d_); }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }
  Desc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const void* values) {
    CONVOY_CUDNN_CHECK(cudnnBackendSetAttribute(d_, name, type, count, values));
    return *this;
  }
  Desc& set(cudnnBackendAttributeName_t name, const Desc& other) {
    cudnnBackendDescriptor_t o = other.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o);
  }
  cudnnStatus_t finalize() { return cudnnBackendFinalize(d_); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// The tensors' unique ids in the graph; the epilogue's intermediates (virtual) count up from kNext.
constexpr int64_t kX = 1, kW = 2, kY = 3, kBias = 4, kResidual = 5, kScale = 6, kResidualScale = 7, kNext = 10;

// `is_virtual`: an intermediate of a fused graph, never in memory (f32).
std::unique_ptr<Desc> tensor(int64_t uid, cudnnDataType_t type, const std::array<int64_t, 4>& d, Layout layout,
                             bool is_virtual = false) {
  const int64_t c = d[1], h = d[2], w = d[3];
  const std::array<int64_t, 4> strides = layout == Layout::nhwc ? std::array<int64_t, 4>{c * h * w, 1, w * c, c}
                                                                : std::array<int64_t, 4>{c * h * w, h * w, w, 1};
  if (is_virtual) type = CUDNN_DATA_FLOAT;
  const int64_t alignment = 16;
  auto t = std::make_unique<Desc>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  t->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, d.data())
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data())
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid)
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  if (is_virtual) {
    const bool yes = true;
    t->set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes);
  }
  CONVOY_CUDNN_CHECK(t->finalize());
  return t;
}

// Whether an engine configuration's engine carries `note` among its behaviour or numerical notes.
template <class Note>
bool has_note(const Desc& engine, cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type, Note note) {
  Note notes[32];
  int64_t count = 0;
  if (cudnnBackendGetAttribute(engine.get(), attr, type, 32, &count, notes) != CUDNN_STATUS_SUCCESS) return false;
  return std::find(notes, notes + std::min<int64_t>(count, 32), note) != notes + std::min<int64_t>(count, 32);
}

// The type of the tensors in memory (x, w, y, residual).
cudnnDataType_t io_type(const GraphConvSpec& spec) {
  switch (spec.quantized) {
    case QuantType::int8: return CUDNN_DATA_INT8;
    case QuantType::fp8_e4m3: return CUDNN_DATA_FP8_E4M3;
    case QuantType::none: break;
  }
  return cudnn_type(spec.dtype);
}

// Where in cuDNN's heuristics lists (mode A, then fallback) an engine configuration stands.
struct ChosenEngine {
  int mode = 0;
  int64_t index = 0;
};

// The engine each graph settled on, by the graph (spec, choice) and the device: a later build of
// the same graph in the process takes it without timing again, as PyTorch's cudnn.benchmark
// cache does. Two builds of one convolution (a model's second instance, a server's plans and a
// test's) then run the same engine, and sum in the same order bit for bit (timing noise made
// two builds of a tf32 plan keep different engines, 6e-6 apart), and the second build costs
// neither timing runs nor the compiles of the engines that lost.
std::mutex chosen_mutex;
std::map<std::string, ChosenEngine>& chosen_engines() {
  static std::map<std::string, ChosenEngine> chosen;
  return chosen;
}

std::string graph_key(const GraphConvSpec& s, const GraphConvChoice& c) {
  int device = -1;
  cudaGetDevice(&device);
  std::ostringstream k;
  k << device << ' ' << int(s.kind) << ' ' << int(s.dtype) << ' ' << int(s.quantized) << ' ' << int(s.x_layout)
    << int(s.w_layout) << int(s.y_layout) << ' ' << s.accumulate << s.bias << s.residual << s.relu;
  for (const auto* dims : {&s.x, &s.w, &s.y})
    for (int64_t d : *dims) k << ' ' << d;
  for (const auto* pair : {&s.pad, &s.stride, &s.dilation}) k << ' ' << (*pair)[0] << ',' << (*pair)[1];
  k << ' ' << c.benchmark << c.deterministic << ' ' << c.workspace_limit << ' ' << c.runtime_compiled;
  return k.str();
}

std::optional<ChosenEngine> chosen_engine(const std::string& key) {
  std::lock_guard<std::mutex> lock(chosen_mutex);
  const auto it = chosen_engines().find(key);
  if (it == chosen_engines().end()) return std::nullopt;
  return it->second;
}

void remember_engine(const std::string& key, ChosenEngine engine) {
  std::lock_guard<std::mutex> lock(chosen_mutex);
  chosen_engines().emplace(key, engine);
}

}  // namespace

const char* quant_name(QuantType q) {
  switch (q) {
    case QuantType::int8: return "int8";
    case QuantType::fp8_e4m3: return "fp8";
    case QuantType::none: break;
  }
  return "none";
}

std::string quant_unsupported_reason(QuantType q, int major, int minor) {
  const int cc = 10 * major + minor;
  const std::string gpu = "compute capability " + std::to_string(major) + "." + std::to_string(minor);
  if (q == QuantType::fp8_e4m3 && cc < 89)
    return "FP8 (e4m3) needs tensor cores of compute capability 8.9 or newer (Ada, Hopper); this GPU has " + gpu +
           ": use int8 or bf16";
  if (q == QuantType::int8 && cc < 61) return "int8 convolutions need compute capability 6.1 or newer; this GPU has " + gpu;
  return "";
}

struct GraphConvPlan::Descriptors {
  std::vector<std::unique_ptr<Desc>> kept;  // everything the plan was built from
  std::unique_ptr<Desc> plan;
  // The variant pack of the last run: rebuilt only when a pointer changes (a replayed or
  // steady loop hands the same buffers every time).
  std::unique_ptr<Desc> pack;
  std::array<const void*, 8> pack_ptrs{};
};

GraphConvPlan::GraphConvPlan() : desc_(std::make_unique<Descriptors>()) {}
GraphConvPlan::~GraphConvPlan() = default;

std::unique_ptr<GraphConvPlan> GraphConvPlan::build(cudnnHandle_t handle, const GraphConvSpec& spec,
                                                    const GraphConvChoice& choice, const void* x, const void* w,
                                                    const void* y, const std::function<void*(size_t)>& workspace,
                                                    const GraphConvOperands& epilogue) {
  std::vector<std::unique_ptr<Desc>> kept;
  auto keep = [&](std::unique_ptr<Desc> d) -> Desc& {
    kept.push_back(std::move(d));
    return *kept.back();
  };
  if (spec.fused() && spec.kind != ConvKind::forward) return nullptr;
  const bool quantized = spec.quantized != QuantType::none;
  const cudnnDataType_t type = io_type(spec);
  Desc& tx = keep(tensor(kX, type, spec.x, spec.x_layout));
  Desc& tw = keep(tensor(kW, type, spec.w, spec.w_layout));
  Desc& ty = keep(tensor(kY, type, spec.y, spec.y_layout));
  // With an epilogue the convolution writes a virtual f32 tensor the pointwise ops read.
  int64_t next_uid = kNext;
  auto intermediate = [&]() -> Desc& { return keep(tensor(next_uid++, type, spec.y, spec.y_layout, true)); };
  Desc& conv_out = spec.fused() ? intermediate() : ty;

  Desc& conv = keep(std::make_unique<Desc>(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR));
  // int8 products summed exactly in int32; everything else in f32.
  const cudnnDataType_t compute = spec.quantized == QuantType::int8 ? CUDNN_DATA_INT32 : CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2;
  conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute)
      .set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)
      .set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims)
      .set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, spec.dilation.data())
      .set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, spec.stride.data())
      .set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, spec.pad.data())
      .set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, spec.pad.data());
  if (conv.finalize() != CUDNN_STATUS_SUCCESS) return nullptr;

  const float alpha = 1.f, beta = spec.accumulate ? 1.f : 0.f;
  Desc* op = nullptr;
  switch (spec.kind) {
    case ConvKind::forward:
      op = &keep(std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR));
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, tx)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, tw)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, conv_out)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
      break;
    case ConvKind::backward_data:
      op = &keep(std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR));
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, tx)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, tw)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, ty)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, conv)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
      break;
    case ConvKind::backward_filter:
      op = &keep(std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR));
      op->set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, tx)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, tw)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, ty)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, conv)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha)
          .set(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
      break;
  }
  if (op->finalize() != CUDNN_STATUS_SUCCESS) return nullptr;
  std::vector<cudnnBackendDescriptor_t> ops{op->get()};

  // The epilogue, each a pointwise op in f32: (x scale,) + bias, + residual (x its scale), ReLU;
  // the last writes y (rounded and saturated to y's type).
  const std::array<int64_t, 4> per_channel{1, spec.y[1], 1, 1};
  auto pointwise = [&](cudnnPointwiseMode_t mode, Desc& in, Desc* operand, Desc& out) {
    Desc& pw = keep(std::make_unique<Desc>(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
    const cudnnDataType_t math = CUDNN_DATA_FLOAT;
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math);
    if (pw.finalize() != CUDNN_STATUS_SUCCESS) return false;
    Desc& node = keep(std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
    node.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, in)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, out);
    if (operand) node.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *operand);
    if (node.finalize() != CUDNN_STATUS_SUCCESS) return false;
    ops.push_back(node.get());
    return true;
  };
  // The residual, scaled first where it is 8-bit (a second pointwise chain into the add).
  Desc* residual = nullptr;
  if (spec.residual) {
    residual = &keep(tensor(kResidual, type, spec.y, spec.y_layout));
    if (quantized) {
      Desc& scaled = intermediate();
      if (!pointwise(CUDNN_POINTWISE_MUL, *residual, &keep(tensor(kResidualScale, CUDNN_DATA_FLOAT, per_channel, spec.y_layout)),
                     scaled))
        return nullptr;
      residual = &scaled;
    }
  }
  std::vector<std::pair<cudnnPointwiseMode_t, Desc*>> steps;  // mode, its second operand
  if (quantized) steps.push_back({CUDNN_POINTWISE_MUL, &keep(tensor(kScale, CUDNN_DATA_FLOAT, per_channel, spec.y_layout))});
  if (spec.bias) steps.push_back({CUDNN_POINTWISE_ADD, &keep(tensor(kBias, CUDNN_DATA_FLOAT, per_channel, spec.y_layout))});
  if (residual) steps.push_back({CUDNN_POINTWISE_ADD, residual});
  if (spec.relu) steps.push_back({CUDNN_POINTWISE_RELU_FWD, nullptr});
  Desc* in = &conv_out;
  for (size_t i = 0; i < steps.size(); ++i) {
    Desc& out = i + 1 == steps.size() ? ty : intermediate();
    if (!pointwise(steps[i].first, *in, steps[i].second, out)) return nullptr;
    in = &out;
  }

  Desc& graph = keep(std::make_unique<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(ops.size()), ops.data())
      .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  if (graph.finalize() != CUDNN_STATUS_SUCCESS) return nullptr;

  // The candidates, best first: heuristics mode A's list, then the fallback list. Where this
  // graph was timed before in the process, only the engine it settled on.
  struct Candidate {
    std::unique_ptr<Desc> plan;
    size_t workspace;
    ChosenEngine engine;
  };
  std::vector<Candidate> candidates;
  const std::string key = graph_key(spec, choice);
  const std::optional<ChosenEngine> chosen = chosen_engine(key);
  const size_t wanted = chosen || !choice.benchmark ? 1 : 6;
  int compiled = 0;  // run-time compiled engines built so far
  const cudnnBackendHeurMode_t heur_modes[] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
  for (int mode = 0; mode < 2; ++mode) {
    const cudnnBackendHeurMode_t heur_mode = heur_modes[mode];
    if (candidates.size() >= wanted) break;
    if (chosen && chosen->mode != mode) continue;
    Desc& heur = keep(std::make_unique<Desc>(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
    heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph).set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &heur_mode);
    if (heur.finalize() != CUDNN_STATUS_SUCCESS) continue;
    int64_t count = 0;
    if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                 nullptr) != CUDNN_STATUS_SUCCESS)
      continue;
    count = std::min<int64_t>(count, 16);
    std::vector<std::unique_ptr<Desc>> configs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
      configs.push_back(std::make_unique<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
      raw.push_back(configs.back()->get());
    }
    int64_t got = 0;
    if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                 raw.data()) != CUDNN_STATUS_SUCCESS)
      continue;
    for (int64_t i = 0; i < got && candidates.size() < wanted; ++i) {
      if (chosen && chosen->index != i) continue;
      Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
      int64_t n = 0;
      cudnnBackendDescriptor_t e = engine.get();
      if (cudnnBackendGetAttribute(raw[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e) !=
          CUDNN_STATUS_SUCCESS)
        continue;
      const bool compiles = has_note(engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                     CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION);
      if (compiles && compiled >= choice.runtime_compiled) continue;
      if (choice.deterministic && has_note(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                           CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC))
        continue;
      // f32 (TF32) keeps its inputs' 10-bit mantissas at least: no engine that narrows them to
      // fp16 or bf16 first.
      if (!quantized && spec.dtype == DType::f32 && has_note(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                               CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS))
        continue;
      auto plan = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
      plan->set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw[i]);
      compiled += compiles;
      if (plan->finalize() != CUDNN_STATUS_SUCCESS) continue;
      int64_t bytes = 0;
      if (cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                   &bytes) != CUDNN_STATUS_SUCCESS ||
          bytes < 0 || static_cast<size_t>(bytes) > choice.workspace_limit)
        continue;
      candidates.push_back({std::move(plan), static_cast<size_t>(bytes), ChosenEngine{mode, i}});
    }
    for (auto& c : configs) kept.push_back(std::move(c));
  }
  if (candidates.empty()) return nullptr;

  std::unique_ptr<GraphConvPlan> out(new GraphConvPlan());
  size_t best = 0;
  if (candidates.size() > 1) {
    // Time each on the live buffers: one warm-up run, then three.
    cudaStream_t stream = nullptr;
    CONVOY_CUDNN_CHECK(cudnnGetStream(handle, &stream));
    cudaEvent_t start, stop;
    CONVOY_CUDA_CHECK(cudaEventCreate(&start));
    CONVOY_CUDA_CHECK(cudaEventCreate(&stop));
    float best_ms = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      out->desc_->plan = std::move(candidates[i].plan);
      out->workspace_ = candidates[i].workspace;
      void* ws = workspace(out->workspace_);
      bool ok = true;
      float ms = 0;
      try {
        out->run(handle, x, w, y, ws, epilogue);
        CONVOY_CUDA_CHECK(cudaEventRecord(start, stream));
        for (int r = 0; r < 3; ++r) out->run(handle, x, w, y, ws, epilogue);
        CONVOY_CUDA_CHECK(cudaEventRecord(stop, stream));
        CONVOY_CUDA_CHECK(cudaEventSynchronize(stop));
        CONVOY_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      } catch (const DeviceError&) {
        ok = false;  // an engine that builds and then refuses to run: not a candidate
      }
      if (ok && (best_ms == 0 || ms < best_ms)) {
        best_ms = ms;
        best = i;
      }
      candidates[i].plan = std::move(out->desc_->plan);
      out->desc_->pack.reset();
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (best_ms == 0) return nullptr;
  }
  if (!chosen) remember_engine(key, candidates[best].engine);
  out->desc_->plan = std::move(candidates[best].plan);
  out->workspace_ = candidates[best].workspace;
  out->desc_->kept = std::move(kept);
  return out;
}

void GraphConvPlan::run(cudnnHandle_t handle, const void* x, const void* w, const void* y, void* workspace,
                        const GraphConvOperands& e) {
  Descriptors& d = *desc_;
  const std::array<const void*, 8> ptrs{x, w, y, workspace, e.bias, e.residual, e.scale, e.residual_scale};
  if (!d.pack || d.pack_ptrs != ptrs) {
    auto pack = std::make_unique<Desc>(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    std::vector<int64_t> uids{kX, kW, kY};
    std::vector<void*> data{const_cast<void*>(x), const_cast<void*>(w), const_cast<void*>(y)};
    const std::pair<int64_t, const void*> optional[] = {
        {kBias, e.bias}, {kResidual, e.residual}, {kScale, e.scale}, {kResidualScale, e.residual_scale}};
    for (const auto& [uid, ptr] : optional)
      if (ptr) uids.push_back(uid), data.push_back(const_cast<void*>(ptr));
    pack->set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()), uids.data())
        .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(data.size()), data.data())
        .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    CONVOY_CUDNN_CHECK(pack->finalize());
    d.pack = std::move(pack);
    d.pack_ptrs = ptrs;
  }
  CONVOY_CUDNN_CHECK(cudnnBackendExecute(handle, d.plan->get(), d.pack->get()));
}

}  // namespace convoy::cuda
