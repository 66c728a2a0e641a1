// InferencePlan: buffers placed in one arena by lifetime, run(), calibration, and the
// precision checks.
#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string_view>

#include "engine/backends/cpu/onednn_compat.h"
#include "engine/core/error.h"
#include "engine/inference/plan_state.h"
#include "engine/inference/quantize.h"
#include "engine/inference/team_chooser.h"

namespace convoy {

// The teams below the full one (TeamChooser), each a plan of its own built when first tried:
// oneDNN splits a primitive's work for the team it was created under. They share their
// weights and one arena (they never run at the same time); none is built on a quiet machine.
struct InferencePlan::Teams {
  TeamChooser chooser;
  InferenceOptions options;  // the plan's, with its layout fixed and its sharing
  std::vector<std::unique_ptr<Impl>> impls;  // by chooser level; [0] is the plan's own (impl_)

  Teams(int threads, const InferenceOptions& o, bool blocked) : chooser(threads), options(o) {
    options.layout = blocked ? PlanLayout::blocked : PlanLayout::onednn;
    if (!options.sharing) options.sharing = std::make_shared<plan::PlanSharing>();
    impls.resize(chooser.teams().size());
  }
};

// Greedy placement, largest first, at the lowest offset clear of every placed buffer whose
// lifetime overlaps; the scratchpad (shared by all steps, which run one at a time) goes first.
void InferencePlan::Impl::place_buffers() {
  std::vector<int> order;
  for (int i = 0; i < static_cast<int>(buffers.size()); ++i)
    if (buffers[i].kind == Buffer::Kind::arena) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return buffers[a].bytes > buffers[b].bytes; });
  const size_t scratch_end = (scratch_bytes + kAlign - 1) / kAlign * kAlign;
  std::vector<int> placed;
  size_t end = scratch_end;
  for (int i : order) {
    Buffer& b = buffers[i];
    std::vector<std::pair<size_t, size_t>> busy;
    for (int j : placed)
      if (buffers[j].first <= b.last && b.first <= buffers[j].last)
        busy.emplace_back(buffers[j].offset, buffers[j].offset + buffers[j].bytes);
    std::sort(busy.begin(), busy.end());
    size_t offset = scratch_end;
    for (const auto& [lo, hi] : busy) {
      if (offset + b.bytes <= lo) break;
      offset = std::max(offset, (hi + kAlign - 1) / kAlign * kAlign);
    }
    b.offset = offset;
    end = std::max(end, offset + b.bytes);
    placed.push_back(i);
  }
  arena_bytes = std::max<size_t>(end, kAlign);
  // Plans that run one at a time share one arena; a plan alone owns its own.
  void* base_ptr = sharing ? sharing->arena(arena_bytes)
                           : (arena = alloc_arena(arena_bytes));
  if (!base_ptr)
    throw OutOfMemoryError("inference plan: cannot allocate its " + std::to_string(arena_bytes) + "-byte arena");
  auto* base = static_cast<char*>(base_ptr);
  scratch = dnnl::memory(f32_md({static_cast<int64_t>(std::max<size_t>(scratch_bytes, 4) / 4)}, Tag::a), engine, base);
  for (Step& s : steps) {
    for (const Arg& a : s.args) {
      if (a.value < 0) {
        s.bound.emplace(a.arg, a.fixed);
        continue;
      }
      const Value& v = values[a.value];
      const Buffer& b = buffers[v.buffer];
      void* ptr = b.kind == Buffer::Kind::output ? output.raw() : b.kind == Buffer::Kind::input ? nullptr : base + b.offset;
      s.bound.emplace(a.arg, dnnl::memory(v.md, engine, ptr ? ptr : DNNL_MEMORY_NONE));
      if (b.kind == Buffer::Kind::input) input_mems.push_back(&s.bound.at(a.arg));
    }
    if (scratch_bytes) s.bound.emplace(DNNL_ARG_SCRATCHPAD, scratch);
  }
}

void InferencePlan::Impl::refresh_weights() {
  ThreadScope scope(threads);
  for (auto& w : weights) w->refresh(model.weights_version());
  weights_version = model.weights_version();
}

std::string bf16_unsupported_reason() {
  // AMX contains AVX-512 BF16. oneDNN 2.6 would emulate bf16 on plain AVX-512, slower than
  // fp32: refused.
  if (cpu_has(dnnl::cpu_isa::avx512_core_bf16)) return "";
  std::ostringstream hex;
  hex << std::hex << static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  return "bf16 inference needs a CPU with AVX-512 BF16 or AMX, which oneDNN does not find here (its ISA mask 0x" +
         hex.str() + "; see the avx512_bf16 flag in /proc/cpuinfo, and DNNL_MAX_CPU_ISA)";
}

// Refuses a precision this CPU, this oneDNN or these options cannot run.
static void check_precision(Model& model, const InferenceOptions& o) {
  if (o.precision == Precision::tf32)
    throw InputError(std::string(to_string(o.precision)) + " is not a CPU inference plan precision (" +
                     precision_list(kPlanPrecisions) + ")");
  if (o.precision == Precision::bf16) {
    if (const std::string why = bf16_unsupported_reason(); !why.empty()) throw InputError(why);
  }
  if (o.precision != Precision::int8) return;
  if (!cpu::onednn::kHasOutputScales)
    throw InputError("int8 inference plans need oneDNN 2.x output scales; this build uses oneDNN " +
                     std::to_string(DNNL_VERSION_MAJOR) + "." + std::to_string(DNNL_VERSION_MINOR));
  const size_t want = model.graph_nodes().size() + 1;
  if (o.activation_max.size() != want)
    throw InputError("int8 inference plan for model '" + model.name() + "': " + std::to_string(o.activation_max.size()) +
                     " calibrated ranges for " + std::to_string(want) + " tensors (input + layers): calibrate first");
  for (float v : o.activation_max)
    if (!std::isfinite(v) || v < 0)
      throw InputError("int8 inference plan for model '" + model.name() + "': a calibrated range is " +
                       std::to_string(v) + " (expected finite and >= 0)");
}

std::string InferencePlan::unsupported_reason(Model& model) {
  for (const Model::GraphNode& n : model.graph_nodes()) {
    const LayerSpec spec = n.layer->spec();
    if (!is_known(spec))
      return "layer '" + n.layer->name() + "' (" + std::string(layer_type(spec)) + ") has no inference plan";
    if (std::holds_alternative<AddSpec>(spec) && n.inputs.size() != 2)
      return "layer '" + n.layer->name() + "' adds more than two inputs";
    for (Parameter* p : n.layer->parameters())
      if (!p->value.device().is_cpu() || p->value.dtype() != DType::f32) return "weights are not f32 on the CPU";
    for (Buffer* b : n.layer->buffers())
      if (!b->value.device().is_cpu() || b->value.dtype() != DType::f32) return "buffers are not f32 on the CPU";
  }
  return "";
}

namespace {

// Timing input for choosing a layout: uniform values in [0, 1), not zeros (they can run faster).
Tensor tuning_input(const Model& model, int64_t batch) {
  const Shape& in = model.input_shape();
  Tensor x = Tensor::empty({batch, in[0], in[1], in[2]});
  uint32_t state = 12345;
  float* p = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    state = state * 1664525u + 1013904223u;
    p[i] = static_cast<float>(state >> 8) / 16777216.0f;
  }
  return x;
}

}  // namespace

InferencePlan::InferencePlan(Model& model, int64_t batch, const InferenceOptions& options) {
  if (batch < 1) throw InputError("inference plan: batch must be positive, got " + std::to_string(batch));
  if (const std::string why = unsupported_reason(model); !why.empty())
    throw InputError("model '" + model.name() + "': " + why);
  int threads = options.threads > 0 ? options.threads : omp_get_max_threads();
  if (options.threads == 0 && options.flops_per_thread > 0)
    threads = static_cast<int>(std::clamp<int64_t>(model.forward_flops() * batch / options.flops_per_thread, 1, threads));
  const bool adapt = options.threads == 0 && options.adaptive_team && threads > 1;
  check_precision(model, options);
  PlanLayout layout = runs_winograd(model, batch, options) ? options.layout : PlanLayout::onednn;
  if (layout == PlanLayout::tuned) {
    // Built both ways without sharing (the loser's weights go with it) and timed on one input:
    // a warm-up pass each, then the best of two passes each, alternating.
    InferenceOptions alone = options;
    alone.threads = threads;
    alone.sharing = nullptr;
    alone.layout = PlanLayout::blocked;
    InferencePlan blocked(model, batch, alone);
    alone.layout = PlanLayout::onednn;
    InferencePlan chosen(model, batch, alone);
    const Tensor x = tuning_input(model, batch);
    InferencePlan* candidates[2] = {&blocked, &chosen};
    double best[2] = {1e30, 1e30};  // seconds a pass
    for (int round = 0; round < 3; ++round)
      for (int i = 0; i < 2; ++i) {
        const auto start = std::chrono::steady_clock::now();
        candidates[i]->run(x);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (round > 0) best[i] = std::min(best[i], s);
      }
    layout = best[0] <= best[1] ? PlanLayout::blocked : PlanLayout::onednn;
    if (!options.sharing) {
      impl_ = std::move(layout == PlanLayout::blocked ? blocked.impl_ : chosen.impl_);
      if (adapt) teams_ = std::make_unique<Teams>(threads, options, impl_->blocked);
      return;
    }
  }
  impl_ = std::make_unique<Impl>(model, batch, threads, options, layout == PlanLayout::blocked);
  try {
    ThreadScope scope(threads);  // oneDNN partitions its work for the team it is built under
    impl_->build();
  } catch (const dnnl::error& e) {
    throw DeviceError("inference plan for model '" + model.name() + "': oneDNN: " + e.what());
  }
  impl_->refresh_weights();
  if (adapt) teams_ = std::make_unique<Teams>(threads, options, impl_->blocked);
}

InferencePlan::~InferencePlan() = default;

namespace {

// The machine's idle CPU time, all CPUs (the idle and iowait columns of /proc/stat's first line,
// in clock ticks), or -1 where it cannot be read.
double machine_idle_seconds() {
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return -1;
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0;
  const int got = std::fscanf(f, "cpu %llu %llu %llu %llu %llu", &user, &nice, &system, &idle, &iowait);
  std::fclose(f);
  static const long ticks = sysconf(_SC_CLK_TCK);
  if (got != 5 || ticks <= 0) return -1;
  return static_cast<double>(idle + iowait) / static_cast<double>(ticks);
}

// The process's CPU time (all its threads: the team's), the wall clock and the machine's idle time.
TeamChooser::Usage process_usage() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return {seconds(u.ru_utime) + seconds(u.ru_stime),
          std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(),
          machine_idle_seconds()};
}

}  // namespace

InferencePlan::Impl& InferencePlan::impl_for_next_pass() {
  if (!teams_ || teams_->chooser.threads() == impl_->threads) return *impl_;
  const auto level = static_cast<size_t>(std::find(teams_->chooser.teams().begin(), teams_->chooser.teams().end(),
                                                   teams_->chooser.threads()) -
                                         teams_->chooser.teams().begin());
  std::unique_ptr<Impl>& m = teams_->impls[level];
  if (!m) {
    const int t = teams_->chooser.threads();
    auto built = std::make_unique<Impl>(impl_->model, impl_->batch, t, teams_->options, impl_->blocked);
    try {
      ThreadScope scope(t);
      built->build();
    } catch (const dnnl::error& e) {
      throw DeviceError("inference plan for model '" + impl_->model.name() + "': oneDNN: " + e.what());
    }
    built->refresh_weights();
    m = std::move(built);
  }
  return *m;
}

const Tensor& InferencePlan::run(const Tensor& x) {
  if (!teams_) return run_on(*impl_, x);
  Impl& m = impl_for_next_pass();
  const auto start = std::chrono::steady_clock::now();
  const Tensor& out = run_on(m, x);
  teams_->chooser.record(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), process_usage);
  return out;
}

const Tensor& InferencePlan::run_on(Impl& m, const Tensor& x) {
  const Shape& in = m.model.input_shape();
  if (x.shape() != Shape{m.batch, in[0], in[1], in[2]} || x.dtype() != DType::f32 || !x.device().is_cpu() ||
      x.layout() != Layout::nchw)
    throw InputError("inference plan for model '" + m.model.name() + "' takes f32 nchw " +
                     shape_str({m.batch, in[0], in[1], in[2]}) + " on the CPU, got " + shape_str(x.shape()));
  if (m.model.weights_version() != m.weights_version) m.refresh_weights();
  ThreadScope scope(m.threads);
  for (dnnl::memory* mem : m.input_mems) mem->set_data_handle(const_cast<void*>(x.raw()));
  try {
    for (Impl::Step& s : m.steps) s.prim.execute(m.stream, s.bound);
    m.stream.wait();
  } catch (const dnnl::error& e) {
    throw DeviceError("inference plan for model '" + m.model.name() + "': oneDNN: " + e.what());
  }
  return m.output;
}

void InferencePlan::calibrate(const Tensor& x, std::vector<ActivationHistogram>& node_stats) {
  Impl& m = *impl_;
  if (m.precision != Precision::fp32) throw InputError("calibration runs on an fp32 inference plan");
  CONVOY_CHECK(node_stats.size() == m.node_value.size(), "calibration: one histogram per node and the input");
  m.stream.wait();
  run_on(m, x);  // binds x and refreshes the weights; the steps run again below, one at a time
  // Each value's |values| as its last write left them (a residual copy, then the sum), read
  // before a later step reuses its memory.
  const bool bins = !node_stats.empty() && node_stats[0].keeps_bins();
  std::vector<ActivationHistogram> value_stats(m.values.size(), ActivationHistogram(bins));
  value_stats[0].add(x.data<float>(), static_cast<size_t>(x.numel()));
  ThreadScope scope(m.threads);
  for (Impl::Step& s : m.steps) {
    s.prim.execute(m.stream, s.bound);
    m.stream.wait();
    for (const Impl::Arg& a : s.args) {
      if ((a.arg != DNNL_ARG_DST && a.arg != DNNL_ARG_TO) || a.value < 0) continue;
      const dnnl::memory& mem = s.bound.at(a.arg);
      const auto* p = static_cast<const float*>(mem.get_data_handle());
      const size_t n = mem.get_desc().get_size() / sizeof(float);  // blocked padding holds zeros
      ActivationHistogram& h = value_stats[static_cast<size_t>(a.value)];
      h.clear();
      h.add(p, n);
    }
  }
  // Nodes fused into a later step's group have no value of their own (-1): nothing.
  for (size_t n = 0; n < m.node_value.size(); ++n)
    if (m.node_value[n] >= 0) node_stats[n].merge(value_stats[static_cast<size_t>(m.node_value[n])]);
}

Precision InferencePlan::precision() const { return impl_->precision; }

int64_t InferencePlan::batch() const { return impl_->batch; }
int InferencePlan::threads() const { return impl_->threads; }
int InferencePlan::running_threads() const { return teams_ ? teams_->chooser.chosen() : impl_->threads; }
PlanLayout InferencePlan::layout() const { return impl_->blocked ? PlanLayout::blocked : PlanLayout::onednn; }
size_t InferencePlan::arena_bytes() const { return impl_->arena_bytes; }
size_t InferencePlan::weight_bytes() const {
  size_t n = 0;
  for (const auto& w : impl_->weights) n += w->bytes();
  return n;
}
size_t InferencePlan::primitive_count() const { return impl_->steps.size(); }

std::string InferencePlan::describe() const {
  std::ostringstream out;
  for (const Impl::Step& s : impl_->steps) {
    out << s.what << " [" << s.impl << "]";
    for (const auto& [arg, name] : {std::pair{DNNL_ARG_SRC, " src "}, std::pair{DNNL_ARG_DST, " dst "}})
      if (s.bound.count(arg)) {
        const Md md = s.bound.at(arg).get_desc();
        const Dt t = cpu::onednn::data_type_of(md);
        out << name << (t == Dt::f32 ? "f32" : t == Dt::bf16 ? "bf16" : t == Dt::s8 ? "s8" : t == Dt::u8 ? "u8" : "?")
            << " " << format_of(md);
      }
    out << "\n";
  }
  return out.str();
}

}  // namespace convoy
