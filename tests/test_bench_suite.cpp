// The benchmark harness's parts: the FLOP count against a hand count, suite validation and
// peaks, the CPU peak estimate and the timing loop. `convoy bench` end to end: test_bench.cpp.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "run_command.h"
#include "apps/bench/bench_runner.h"
#include "apps/bench/bench_suite.h"
#include "engine/core/error.h"
#include "engine/graph/model.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;
const std::string kSource = CONVOY_SOURCE_DIR;

TEST(Bench, FlopCountOfATinyModelMatchesAHandCount) {
  const Model m = Model::from_yaml(R"(
name: tiny
input: [1, 6, 6]
layers:
  - {name: conv, type: conv2d, out_channels: 2, kernel: 3}
  - {name: relu, type: relu}
  - {name: pool, type: maxpool2d, kernel: 2}
  - {name: flat, type: flatten}
  - {name: fc, type: linear, out_features: 3}
)", "tiny.yaml", 1);
  // conv: output (2, 4, 4) = 32 values, each 1 channel x 3 x 3 multiply-adds: 2 * 32 * 9 = 576
  // relu: 32; maxpool 2x2: output (2, 2, 2) = 8 values x 4 compares = 32; flatten: 0
  // linear 8 -> 3: 2 * 8 * 3 = 48
  EXPECT_EQ(m.forward_flops(), 576 + 32 + 32 + 48);
  EXPECT_DOUBLE_EQ(bench_flops_per_iteration(688, 5, "inference"), 688.0 * 5);
  EXPECT_DOUBLE_EQ(bench_flops_per_iteration(688, 5, "training"), 688.0 * 5 * 3);
}

TEST(Bench, SuiteErrorsNameFileLineAndKey) {
  const std::string lenet = kSource + "/models/lenet5.yaml";
  auto error_of = [](const std::string& yaml) {
    try {
      parse_bench_suite(yaml, "s.yaml", ".");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string base = "name: t\nmodels:\n  - {model: " + lenet + ", inference: [1, 4]}\n";
  EXPECT_EQ(error_of(base), "");
  std::string e = error_of(base + "bogus: 1\n");
  EXPECT_NE(e.find("s.yaml:4"), std::string::npos) << e;
  EXPECT_NE(e.find("bogus: unknown key"), std::string::npos) << e;
  e = error_of(base + "timing: {warmup_seconds: 1, rounds: 3}\n");
  EXPECT_NE(e.find("timing.rounds: unknown key"), std::string::npos) << e;
  e = error_of("models:\n  - {model: " + lenet + ", inference: [0]}\n");
  EXPECT_NE(e.find("models[0].inference: batch sizes must be positive"), std::string::npos) << e;
  e = error_of("models:\n  - {model: nowhere.yaml, training: [8]}\n");
  EXPECT_NE(e.find("s.yaml:2: models[0].model: file not found"), std::string::npos) << e;
  e = error_of(base + "precisions: [fp16]\n");
  EXPECT_NE(e.find("precisions: 'fp16' is not one of"), std::string::npos) << e;
  e = error_of(base + "devices: [tpu]\n");
  EXPECT_NE(e.find("devices: 'tpu'"), std::string::npos) << e;
  // Every shipped suite is valid.
  for (const fs::directory_entry& entry : fs::directory_iterator(kSource + "/benchmarks/suites")) {
    const std::string suite = entry.path().filename().string();
    EXPECT_NO_THROW(load_bench_suite(kSource + "/benchmarks/suites/" + suite)) << suite;
  }
  const BenchSuite d = load_bench_suite(kSource + "/benchmarks/suites/default.yaml");
  ASSERT_EQ(d.models.size(), 2u);
  EXPECT_EQ(d.models[1].inference_batches, (std::vector<int64_t>{1, 64, 512}));
  EXPECT_EQ(d.models[1].training_batches, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(d.precisions, (std::vector<convoy::Precision>{convoy::Precision::fp32, convoy::Precision::bf16}));
  EXPECT_EQ(gpu_peak_tflops(d.gpu_peaks, "NVIDIA H200", convoy::Precision::bf16).value_or(0), 989);
  EXPECT_EQ(gpu_peak_tflops(d.gpu_peaks, "NVIDIA H200", convoy::Precision::fp32).value_or(0), 67);
  // The suite gives fp32 and bf16 for the H200; tf32 is then half of bf16.
  EXPECT_EQ(gpu_peak_tflops(d.gpu_peaks, "NVIDIA H200", convoy::Precision::tf32).value_or(0), 494.5);
  EXPECT_EQ(gpu_peak_tflops(builtin_gpu_peaks(), "NVIDIA H200", convoy::Precision::tf32).value_or(0), 495);
  EXPECT_FALSE(gpu_peak_tflops(d.gpu_peaks, "Some GPU", convoy::Precision::fp32).has_value());
}

// The torch.compile modes the pytorch_compiled peer tries: by name, each once; default and
// reduce-overhead when the suite says nothing.
TEST(Bench, PeerCompileModesAreCheckedByName) {
  const std::string base = "name: t\nmodels:\n  - {model: " + kSource + "/models/lenet5.yaml, inference: [1]}\n";
  EXPECT_EQ(parse_bench_suite(base, "s.yaml", ".").peer_compile_modes,
            (std::vector<std::string>{"default", "reduce-overhead"}));
  const BenchSuite all = parse_bench_suite(
      base + "peer_compile_modes: [max-autotune-no-cudagraphs, max-autotune, reduce-overhead, default]\n", "s.yaml",
      ".");
  EXPECT_EQ(all.peer_compile_modes, (std::vector<std::string>{"max-autotune-no-cudagraphs", "max-autotune",
                                                              "reduce-overhead", "default"}));
  const auto error_of = [&](const std::string& line) {
    try {
      parse_bench_suite(base + line, "s.yaml", ".");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string e = error_of("peer_compile_modes: [default, fast]\n");
  EXPECT_NE(e.find("s.yaml:4: peer_compile_modes: 'fast' is not one of: default, reduce-overhead, max-autotune, "
                   "max-autotune-no-cudagraphs"), std::string::npos) << e;
  e = error_of("peer_compile_modes: []\n");
  EXPECT_NE(e.find("peer_compile_modes: needs at least one torch.compile mode"), std::string::npos) << e;
  e = error_of("peer_compile_modes: [default, default]\n");
  EXPECT_NE(e.find("peer_compile_modes: 'default' is listed twice"), std::string::npos) << e;
  e = error_of("peer_compile_modes: {mode: default}\n");
  EXPECT_NE(e.find("peer_compile_modes"), std::string::npos) << e;
}

// Which of its variants the pytorch_compiled peer plans, keeps (CONVOY_PEER_VARIANTS) and reports:
// tests/bench_peer_variants.py, plain Python (no torch needed).
TEST(Bench, PeerVariantSelection) {
  const auto r = convoy::testing::run_command("PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 " + kSource +
                                              "/tests/bench_peer_variants.py 2>&1");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("OK"), std::string::npos) << r.output;
}

TEST(Bench, CpuPeakIsCoresTimesClockTimesFlopsPerCycle) {
  const std::string avx512 =
      "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz\ncpu MHz\t\t: 3100.000\n"
      "flags\t\t: fpu sse avx avx2 fma avx512f avx512bw\nphysical id\t: 0\ncore id\t\t: 0\n\n"
      "processor\t: 1\nmodel name\t: Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz\ncpu MHz\t\t: 3100.000\n"
      "flags\t\t: fpu sse avx avx2 fma avx512f avx512bw\nphysical id\t: 0\ncore id\t\t: 1\n\n"
      "processor\t: 2\nmodel name\t: Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz\ncpu MHz\t\t: 3100.000\n"
      "flags\t\t: fpu sse avx avx2 fma avx512f avx512bw\nphysical id\t: 0\ncore id\t\t: 1\n\n";  // an SMT sibling
  CpuPeak p = estimate_cpu_peak(avx512, 0);
  EXPECT_EQ(p.cores, 2);  // 3 logical processors, 2 physical cores
  EXPECT_DOUBLE_EQ(p.ghz, 2.5);  // the nominal clock in the name, not the current MHz
  EXPECT_EQ(p.flops_per_cycle, 64);
  EXPECT_NEAR(p.tflops, 2 * 2.5 * 64 / 1000.0, 1e-12);
  EXPECT_NE(p.assumption.find("avx512f"), std::string::npos);
  EXPECT_EQ(estimate_cpu_peak(avx512, 1).cores, 1);

  const std::string avx2 = "processor : 0\nmodel name : AMD EPYC\ncpu MHz : 2000.0\nflags : sse avx avx2 fma\n";
  p = estimate_cpu_peak(avx2, 0);
  EXPECT_EQ(p.cores, 1);
  EXPECT_DOUBLE_EQ(p.ghz, 2.0);  // no clock in the name: cpu MHz
  EXPECT_EQ(p.flops_per_cycle, 32);
  EXPECT_NEAR(p.tflops, 0.064, 1e-12);
}

TEST(Bench, TimingStopsWhenThreeRoundsAgreeAndReportsPercentiles) {
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 0.5), 2.5);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  EXPECT_NEAR(percentile(hundred, 0.99), 99.01, 1e-9);
  EXPECT_DOUBLE_EQ(median_of({5}), 5);

  // A simulated device: every iteration takes 1 ms of "device time" on a fake clock.
  double now = 0;
  BenchTiming t;
  t.warmup_iterations = 3;
  t.warmup_seconds = 0.01;
  t.round_seconds = 0.05;
  t.latency_samples = 30;
  t.latency_seconds = 1;
  int64_t steps = 0;
  TimingResult r = measure_iterations([&] { now += 1e-3, ++steps; }, [] {}, t, [&] { return now; });
  EXPECT_TRUE(r.stable);
  EXPECT_EQ(r.rounds, 3);
  EXPECT_EQ(r.iterations_per_round, 50);
  EXPECT_NEAR(r.median, 1e-3, 1e-12);
  EXPECT_EQ(r.latencies.size(), 30u);
  EXPECT_NEAR(r.p99, 1e-3, 1e-12);
  EXPECT_EQ(steps, r.warmup_iterations + 3 * 50 + 30);

  // Rounds that never agree (every other round 50% slower): it stops at max_rounds and
  // says it is not stable.
  int64_t syncs = 0;
  t.max_rounds = 7;
  t.max_seconds = 1e9;
  r = measure_iterations([&] { now += 1e-3 * (1 + 0.5 * static_cast<double>(syncs % 2)); }, [&] { ++syncs; }, t,
                         [&] { return now; });
  EXPECT_FALSE(r.stable);
  EXPECT_EQ(r.rounds, 7);
  EXPECT_GT(r.spread, 0.3);

  // Iterations longer than a round (100 ms): the rounds are latency samples already, and the
  // latency phase adds its second's worth after them (10 more), not nothing.
  t.max_rounds = 8;
  r = measure_iterations([&] { now += 0.1; }, [] {}, t, [&] { return now; });
  EXPECT_EQ(r.iterations_per_round, 1);
  EXPECT_EQ(r.latencies.size(), static_cast<size_t>(r.rounds) + 10);
}

// A slow latency sample's time, split by the timing thread's books: a simulated pass of 1 ms
// on a CPU, and one pass in 20 that also waits 30 ms for a CPU and sleeps 9 ms.
TEST(Bench, SlowLatencySamplesAreSplitIntoCpuWaitingAndBlocked) {
  double now = 0;
  ThreadTimes books;
  books.known = true;
  int64_t steps = 0;
  const auto step = [&] {
    now += 1e-3;
    books.on_cpu += 1e-3;
    books.minor_faults += 2;
    if (++steps % 20 == 0) {
      now += 39e-3;
      books.runnable += 30e-3;
      books.involuntary_switches += 1;
    }
  };
  BenchTiming t;
  t.warmup_iterations = 1;
  t.warmup_seconds = 0;
  t.round_seconds = 1e-3;  // one iteration a round: the rounds are latency samples with no books
  t.min_rounds = 3;
  t.max_rounds = 3;
  t.latency_samples = 60;
  t.latency_seconds = 100;
  const TimingResult r = measure_iterations(step, [] {}, t, [&] { return now; }, [&] { return books; });
  ASSERT_EQ(r.latencies.size(), 60u);
  ASSERT_EQ(r.latency_times.size(), 60u);
  EXPECT_FALSE(r.latency_times[0].known);  // a round's sample
  EXPECT_TRUE(r.latency_times[59].known);
  EXPECT_NEAR(r.p50, 1e-3, 1e-12);
  const nlohmann::json slow = slow_samples(r.latencies, r.latency_times, r.p50, kSlowSampleFactor);
  ASSERT_FALSE(slow.is_null());
  // Steps 20, 40 and 60 of the 4 (warm-up, 3 rounds) + 57 counted: the slow ones are the steps
  // numbered 20, 40 and 60, all inside the latency phase (steps 5 - 61).
  EXPECT_EQ(slow["count"], 3);
  EXPECT_NEAR(slow["wall_ms"].get<double>(), 120, 1e-6);
  const nlohmann::json& split = slow["split"];
  EXPECT_EQ(split["samples"], 3);
  EXPECT_NEAR(split["on_cpu_ms"].get<double>(), 3, 1e-6);
  EXPECT_NEAR(split["waiting_for_cpu_ms"].get<double>(), 90, 1e-6);
  EXPECT_NEAR(split["blocked_ms"].get<double>(), 27, 1e-6);
  EXPECT_EQ(split["preemptions"], 3);
  EXPECT_EQ(split["minor_faults"], 6);
  EXPECT_EQ(split["major_faults"], 0);

  // No sample over the bar: no record; a slow sample without books: counted, not split.
  EXPECT_TRUE(slow_samples({1, 1, 1, 2.9}, {}, 1, 3).is_null());
  const nlohmann::json unknown = slow_samples({1, 1, 1, 5}, {}, 1, 3);
  EXPECT_EQ(unknown["count"], 1);
  EXPECT_FALSE(unknown.contains("split"));
}

// The real books move: a thread that spins until the kernel's other account of it (getrusage)
// says 20 ms of CPU has its CPU clock advanced as much, and its parts never exceed the wall time.
// (Not timed by the wall clock: a VM's host can stop the guest's clocks for 100 ms at a time.)
TEST(Bench, ThisThreadsTimesCountItsCpuTime) {
  const auto start = std::chrono::steady_clock::now();
  const ThreadTimes before = this_thread_times();
  if (!before.known) GTEST_SKIP() << "this kernel keeps no /proc/thread-self/schedstat";
  const auto rusage_seconds = [] {
    rusage u{};
    getrusage(RUSAGE_THREAD, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  };
  const double cpu0 = rusage_seconds();
  volatile double sink = 0;
  while (rusage_seconds() - cpu0 < 0.02 && std::chrono::steady_clock::now() - start < std::chrono::seconds(10))
    sink = sink + 1;
  const ThreadTimes d = this_thread_times() - before;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_GE(rusage_seconds() - cpu0, 0.02) << "the thread got no CPU time in 10 s";
  EXPECT_TRUE(d.known);
  EXPECT_GT(d.on_cpu, 0.015);
  EXPECT_GE(d.runnable, 0);
  EXPECT_LE(d.on_cpu + d.runnable, wall + 1e-3);  // schedstat and the clocks round apart
}

}  // namespace
}  // namespace convoy
