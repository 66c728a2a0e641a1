#pragma once
// InferencePlan: a model compiled once for fp32 inference on the CPU at one batch size, with
// oneDNN. Batch norm is folded into the convolution before it (or becomes a depthwise 1x1
// convolution where none is); bias, a residual add (sum post-op) and the activation after it
// are post-ops of the convolution or inner product; weights are reordered once into the
// layout each primitive prefers (blocked) and refreshed only when the model's weights change;
// activations stay in the layout oneDNN picks (nhwc for oneDNN 2.6's brgemm convolutions on
// AVX-512) between layers, with reorders only where a consumer wants another; every activation and every primitive's scratchpad live in one arena
// planned up front; primitives are created once. run() allocates nothing.
// The training path (Model::forward) is untouched: the plan reads the model's layers and
// weights, it never writes them.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/precision.h"
#include "engine/core/engine_options.h"
#include "engine/core/tensor.h"
#include "engine/graph/model.h"

namespace convoy {

class ActivationHistogram;  // engine/inference/quantize.h

namespace plan {
class PlanSharing;
}

// "" when this CPU (as oneDNN sees it, DNNL_MAX_CPU_ISA included) runs bf16 natively, else why not.
std::string bf16_unsupported_reason();

// PlanLayout (engine/core/engine_options.h) is the fp32 activations' memory format where
// convolutions run as Winograd, whose kernel reads and writes nChw16c: `blocked` keeps nChw16c
// throughout (oneDNN's jit kernels for the other convolutions, no reorders); `onednn` leaves each
// primitive oneDNN's choice (its brgemm kernels in nhwc for the others, reorders around the
// Winograd ones). Which runs faster depends on the CPU, the team and the batch, one way or the
// other by up to 19% (benchmarks/RESULTS.md), so by default (`tuned`) the plan is built both ways
// and the one whose passes ran faster is kept. Plans without Winograd take oneDNN's choice.

struct InferenceOptions {
  int threads = 0;  // OpenMP threads for the plan's primitives; 0 = all cores
  // With threads = 0: one thread per this many FLOPs of the pass, at least one and at most all
  // cores, where a larger team costs more to wake than it saves (LeNet-5 at batch 1). 0 turns
  // the rule off.
  int64_t flops_per_thread = 0;
  // What the plan's convolutions and inner products compute in (kPlanPrecisions). fp32 is the
  // default; the others are opt-in: bf16 where the CPU has AVX-512 BF16 or AMX, int8 from a calibration.
  Precision precision = Precision::fp32;
  // int8: the largest |value| of the model input ([0]) and of each graph node's output ([i + 1]),
  // from calibration (InferencePlan::calibrate). Required for int8, ignored otherwise.
  std::vector<float> activation_max;
  // For plans of one model that never run at the same time (other batch sizes of one server
  // instance): where a primitive wants weights in a layout another of them holds, the plan shares
  // that copy, and all use one arena. Null: the plan has its own.
  std::shared_ptr<plan::PlanSharing> sharing;
  PlanLayout layout = PlanLayout::tuned;  // EngineOptions::plan_layout
  // fp32 3x3 stride-1 convolutions through Winograd where it pays (EngineOptions::winograd).
  bool winograd = true;
  // With threads = 0: each pass's team chosen from the passes (TeamChooser): smaller where other
  // processes compete for the cores (EngineOptions::adaptive_team). A given `threads` is kept.
  bool adaptive_team = true;
};

// The work per thread of `convoy infer` and `convoy bench` for small passes: LeNet-5 at batch 1
// (4.7 MFLOP) gets 4 threads, which ran it 1.8-3.5x faster than one and 1.1-1.3x faster than 16
// on the 16-core host; on 2 cores two ran it 1.8x faster than one (benchmarks/RESULTS.md).
inline constexpr int64_t kFlopsPerThread = 1'000'000;

class InferencePlan {
 public:
  // Compiles `model` (f32 weights on the CPU) for inputs (batch, C, H, W). Throws
  // UnsupportedError when a layer has no plan (see unsupported_reason()).
  InferencePlan(Model& model, int64_t batch, const InferenceOptions& options = {});
  ~InferencePlan();
  InferencePlan(const InferencePlan&) = delete;
  InferencePlan& operator=(const InferencePlan&) = delete;

  // Why `model` cannot be planned (a layer type the plan does not know, weights not f32 on the
  // CPU), or "" when it can.
  static std::string unsupported_reason(Model& model);

  // Per graph node: whether an int8 plan quantizes its output with the node's calibrated range
  // (the output of each fused convolution, batch-norm or linear group but the logits). Nodes
  // fused into a later one have no output of their own: calibration leaves their range 0.
  static std::vector<bool> quantized_outputs(Model& model);

  // x (batch, C, H, W) f32 nchw on the CPU -> logits (batch, classes) f32, a tensor owned by the
  // plan and overwritten by the next run(). Re-reads the weights first if they changed.
  const Tensor& run(const Tensor& x);

  // fp32 plans only: runs x like run() and adds the |values| of the input (node_stats[0]) and of
  // each node's output ([i + 1]) to node_stats (graph nodes + 1 of them): what an int8 plan's
  // ranges come from (calibrate_activation_ranges). Nodes fused into a later step get nothing.
  void calibrate(const Tensor& x, std::vector<ActivationHistogram>& node_stats);

  Precision precision() const;

  int64_t batch() const;
  int threads() const;  // the full team
  // The team the passes run with now: threads(), or a smaller one where the cores are contended.
  int running_threads() const;
  // The layout the plan runs with: blocked or onednn (never tuned).
  PlanLayout layout() const;
  // Bytes of the activation + scratchpad arena, of the reordered weights it runs with (shared
  // ones included), and the number of primitives (for tests).
  size_t arena_bytes() const;
  size_t weight_bytes() const;
  size_t primitive_count() const;
  // One line per step: what runs and in which memory formats (for `convoy info`-like output).
  std::string describe() const;

 private:
  struct Impl;
  struct Teams;  // the smaller teams' plans and their chooser (plan_teams.cpp)
  const Tensor& run_on(Impl& m, const Tensor& x);
  Impl& impl_for_next_pass();
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<Teams> teams_;  // null: the one team always
};

}  // namespace convoy
