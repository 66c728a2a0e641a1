#pragma once
// The engine's tunables: switches that change how it computes (never what), for comparisons,
// debugging and tests. Filled once at the top (cli/environment.h reads them from CONVOY_*
// variables; the README's table "Environment variables" says what each does) and handed down
// through the options each part already takes: BackendOptions, InferenceOptions, TrainOptions,
// DatasetSpec, Model::set_fusion, TrainStep::set_recording. The defaults are what ships.
#include <cstdint>
#include <optional>
#include <string>

namespace convoy {

// The compiled cuDNN engines a fused plan may build where neither the user nor the command chose.
inline constexpr int kCudnnCompiledDefault = 1;

// The CUDA backend's (BackendOptions::cuda).
struct CudaTunables {
  bool cudnn_graph = true;  // reduced-precision and tf32 convolutions through cuDNN's graph API; off: legacy calls
  bool stem_gemm = true;    // narrow reduced-precision stems as im2col + a cuBLAS GEMM; off: cuDNN
  // Folded convolutions (conv + bias + add + ReLU) through cuDNN's run-time compiled engines in
  // bf16/f16: at most this many compiled (and timed) per plan; 0: no compiling, the unfused path
  // (a model loads faster and runs slower). One, cuDNN's first pick: on the H200 three per plan
  // made a one-image ResNet-50 `convoy infer` take 21 s instead of 4.4 s (3.4 s with none) for
  // no measurable speed (batch 256: 32.7k vs 32.0k img/s, one run each; batch 1 0.39 ms both).
  // Unset (CONVOY_CUDNN_COMPILED not given): the command's default, kCudnnCompiledDefault unless
  // it sets another (`convoy infer`: 0).
  std::optional<int> cudnn_compiled;
  bool bn_kernels = false;  // batch norm through Convoy's kernels instead of cuDNN
  bool verbose = false;     // lines on stderr: batch norm leaving cuDNN for a dtype, each fused convolution plan
};

// The activation formats of a CPU inference plan in which Winograd runs (InferenceOptions::layout):
// built both ways and the faster kept (tuned), nChw16c throughout (blocked), or oneDNN's choice.
enum class PlanLayout { tuned, blocked, onednn };

struct EngineOptions {
  // Model::set_fusion: ReLUs, residual adds and input-gradient sums fused into the layer before.
  bool fusion = true;
  // TrainStep::set_recording: GPU training steps recorded once as CUDA graphs and replayed.
  bool cuda_graphs = true;
  // Test hook (TrainOptions::engine): the device fails as this step (1-based) starts; 0: never.
  int64_t fault_inject_step = 0;
  CudaTunables cuda;
  // InferenceOptions::winograd: fp32 3x3 stride-1 convolutions through Winograd where it pays.
  bool winograd = true;
  PlanLayout plan_layout = PlanLayout::tuned;  // InferenceOptions::layout
  // InferenceOptions::adaptive_team: a CPU plan's passes run a smaller team where the cores are contended.
  bool adaptive_team = true;
  // nvJPEG's hardware backend where the GPU has one; off: its default (GPU/hybrid) backend.
  bool nvjpeg_hardware = true;
  // DatasetSpec::data_volume: where a container mounts the datasets (a missing dataset's error
  // then says how to mount it); empty outside one.
  std::string data_volume;
};

}  // namespace convoy
