#pragma once
// Timing of training steps and inference passes on one backend, for `convoy bench`.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/backends/backend.h"
#include "apps/bench/bench_suite.h"
#include "apps/bench/thread_times.h"
#include "engine/core/precision.h"

namespace convoy {

// A latency sample over this many times the median is "slow": issue 39's p99 bar, and what
// `slow_samples` in a record splits by where its time went.
inline constexpr double kSlowSampleFactor = 3.0;

// What measure_iterations() found. Times are seconds per iteration.
struct TimingResult {
  double median = 0;        // median over the rounds of (round time / iterations in it)
  double spread = 0;        // (max - min) / median of the last 3 rounds
  bool stable = false;      // spread <= stable_spread before a cap was hit
  int64_t warmup_iterations = 0;
  int64_t rounds = 0;
  int64_t iterations_per_round = 0;
  std::vector<double> latencies;  // synchronized per-iteration samples
  std::vector<ThreadTimes> latency_times;  // the timing thread's books over each of them (unknown for rounds)
  double p50 = 0, p99 = 0;        // of `latencies`
  double seconds = 0;             // wall time of the whole measurement
};

// Times `step` (one iteration, possibly asynchronous) with `sync` (waits for the device):
// warm-up, then rounds of k iterations closed by one sync (k chosen so a round lasts about
// round_seconds) until the last 3 rounds agree within stable_spread or a cap is hit, then
// a latency phase with a sync after every iteration (skipped when k = 1: the rounds were
// already synchronized single iterations). `clock` returns seconds (steady_clock if empty);
// `books` the timing thread's times, read around each latency sample (this_thread_times if empty).
TimingResult measure_iterations(const std::function<void()>& step, const std::function<void()>& sync,
                                const BenchTiming& timing, const std::function<double()>& clock = {},
                                const std::function<ThreadTimes()>& books = {});

// Linear interpolation between closest ranks (numpy's default); q in [0, 1].
double percentile(std::vector<double> values, double q);
double median_of(std::vector<double> values);

// One case of a suite.
struct BenchCase {
  std::string model_path;
  std::string model;      // the model's name
  std::string mode;       // "training" or "inference"
  int64_t batch = 0;
  std::string device;     // "cpu", "cuda", "cuda:N"
  Precision precision = Precision::fp32;  // tf32: GPU (f32 tensors, TF32 math); int8: CPU
};

// Runs one case on `backend` and returns its record (status "ok" or "failed" with the
// error; never throws for a failing op). `peak_tflops` <= 0 means unknown.
nlohmann::json run_bench_case(Backend& backend, const BenchSuite& suite, const BenchCase& c,
                              const BenchTiming& timing, double peak_tflops, const std::string& peak_note,
                              const std::string& device_name);

// A record for a case that was not run (status "skipped", with the reason).
nlohmann::json skipped_bench_record(const BenchCase& c, const std::string& reason);

// Forward FLOPs per image x batch, x3 for a training step (forward + backward data +
// backward weights).
double bench_flops_per_iteration(int64_t forward_flops_per_image, int64_t batch, const std::string& mode);

// The environment record: GPU, driver, CUDA, cuDNN, oneDNN, CPU, threads, git commit, date.
nlohmann::json bench_environment(const std::string& source_dir, int64_t threads);

// The GPU's name from a CUDA backend's describe() ("cuda:0 (NVIDIA H200, ...") or "".
std::string gpu_name_from_describe(const std::string& describe);

}  // namespace convoy
