#pragma once
// Benchmark suites (benchmarks/suites/*.yaml), validated, and the peak FLOP rates each
// case's achieved rate is compared against.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/config/run_config.h"
#include "engine/core/precision.h"
#include "engine/core/engine_options.h"

namespace convoy {

// How one case is timed. See benchmarks/README.md ("Method").
struct BenchTiming {
  int64_t warmup_iterations = 5;  // at least this many warm-up iterations...
  double warmup_seconds = 0.5;    // ...and at least this long
  double round_seconds = 0.2;     // a round runs enough iterations to last about this long
  int64_t min_rounds = 3;
  int64_t max_rounds = 30;
  double stable_spread = 0.02;    // stop when the last 3 rounds agree within this (max-min)/median
  double max_seconds = 30;        // cap per case on warm-up + rounds (min_rounds always run)
  int64_t latency_samples = 200;  // per-iteration synchronized samples for p50/p99
  double latency_seconds = 3;     // cap on the latency phase
  int64_t profile_steps = 0;      // > 0: then this many steps with per-layer times (--profile)
};

// One model of a suite and the batch sizes of each mode.
struct BenchModel {
  std::string path;                        // resolved model YAML path
  std::vector<int64_t> inference_batches;
  std::vector<int64_t> training_batches;
};

// Dense peak rates of a GPU whose name contains `match` (TFLOP/s).
struct GpuPeak {
  std::string match;
  double fp32 = 0;  // FMA pipes, no tensor cores (Convoy's fp32 is exact FMA math, no TF32)
  double bf16 = 0;  // tensor cores, dense
  double tf32 = 0;  // tensor cores, dense (half the bf16 rate on NVIDIA's data-centre cards)
};

struct BenchSuite {
  std::string source;  // the suite file, for messages
  std::string name = "suite";
  std::vector<BenchModel> models;
  std::vector<std::string> devices = {"cuda", "cpu"};  // cuda, cuda:N, cpu
  std::vector<Precision> precisions = {Precision::fp32};
  std::string gpu_layout = "auto";  // auto (the backend's choice) | nchw | nhwc; GPU cases only
  int64_t threads = 0;                                 // CPU threads; 0 = all cores
  uint64_t seed = 1;
  int64_t input_sets = 4;  // distinct random batches, rotated, so caches do not flatter
  // The training step's recipe (fmnet's by default).
  OptimizerConfig optimizer;
  double label_smoothing = 0.1;
  std::vector<double> mean = {0.5}, std = {0.25};  // one value, or one per channel
  int64_t crop_padding = 2;
  bool horizontal_flip = true;
  BenchTiming timing;
  std::vector<GpuPeak> gpu_peaks;  // the built-in table unless the suite gives one
  double cpu_peak_tflops = 0;      // 0 = estimate from /proc/cpuinfo
  std::vector<std::string> peers = {"pytorch", "onnxruntime"};
  // torch.compile modes the pytorch_compiled peer tries, each on a fresh model; it reports the
  // fastest (a careful user would pick it), with every mode's figure in the record.
  std::vector<std::string> peer_compile_modes = {"default", "reduce-overhead"};
  bool cpu_inference_plan = true;  // CPU fp32 inference through engine/inference (--no-plan: layer by layer)
  bool cuda_graphs = true;         // GPU inference and training steps replayed from CUDA graphs (--no-cuda-graphs: op by op)
  EngineOptions engine;            // the environment's tunables (run_bench)
};

// Reads and validates a suite; unknown keys and bad values name file:line and the key.
// Model paths are resolved against the suite file's directory.
BenchSuite load_bench_suite(const std::string& path);
BenchSuite parse_bench_suite(const std::string& yaml_text, const std::string& source,
                             const std::string& base_dir);

// The modes torch.compile accepts, for the suite key `peer_compile_modes`.
inline constexpr const char* kPeerCompileModes[] = {"default", "reduce-overhead", "max-autotune",
                                                    "max-autotune-no-cudagraphs"};

// A short timing for smoke runs (`convoy bench --quick`).
BenchTiming quick_bench_timing();

// The precisions a case can have: all of them. tf32 is the GPU's (f32 tensors, TF32 math), int8
// the CPU inference plan's (infers_in).
inline constexpr auto& kBenchPrecisions = kAllPrecisions;

// H200/H100/A100/L40S/... dense peaks (datasheet figures).
std::vector<GpuPeak> builtin_gpu_peaks();
// The peak of `gpu_name` at `precision` (fp32, bf16, tf32) from `table`, if listed.
std::optional<double> gpu_peak_tflops(const std::vector<GpuPeak>& table, const std::string& gpu_name,
                                      Precision precision);

// The CPU's fp32 peak, estimated from /proc/cpuinfo text: cores used x GHz x FLOP/cycle/core.
struct CpuPeak {
  double tflops = 0;
  int64_t cores = 0;          // physical cores used (min of threads and cores present)
  double ghz = 0;
  int64_t flops_per_cycle = 0;
  std::string model_name;
  std::string assumption;     // one line, how it was computed
};
CpuPeak estimate_cpu_peak(const std::string& cpuinfo_text, int64_t threads);

}  // namespace convoy
