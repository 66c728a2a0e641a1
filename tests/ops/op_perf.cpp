// convoy_op_perf: the op tests' perf mode. Every case of tests/ops/cases_*.cpp, on every
// backend usable here (the CPU; CUDA device 0 in each test configuration), in every variant
// the backend supports(), is one Google Benchmark named <backend>/<op>/<what>/<dtype>_<layout>:
//
//   convoy_op_perf --benchmark_filter=conv2d_forward --benchmark_min_time=0.05
//   convoy_op_perf --perf --benchmark_filter='^cuda/.*bf16_nhwc'
//
// `--perf` is accepted (and changes nothing) so the spelling works: timing is what
// this program does; the correctness checks of the same cases are convoy_tests and
// convoy_cuda_tests. A case's inputs are built once, before timing, from the same seeded
// values the tests use (never zeros); one warm-up run lets cuDNN pick its algorithms. Each
// timed iteration runs the case's op calls and then waits for the device (synchronize()), so
// the time is the device's, not the launch's; it is reported per op call (a case running
// several optimizer steps is divided by their number).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "tests/ops/op_cases.h"
#include "tests/ops/test_backends.h"

namespace convoy::optest {
namespace {

std::string benchmark_name(const TestBackend& b, const OpCase& c, const Variant& v) {
  return b.name + "/" + c.name + "/" + dtype_str(v.dtype) + (v.layout == Layout::nhwc ? "_nhwc" : "_nchw");
}

void time_case(benchmark::State& state, const TestBackend* b, const OpCase* c, Variant v) {
  try {
    Backend& be = shared_backend(*b);
    Prepared p = c->prepare(be, v, v.dtype);
    p.run();
    be.synchronize();
    for (auto _ : state) {
      const auto start = std::chrono::steady_clock::now();
      p.run();
      be.synchronize();
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      state.SetIterationTime(took.count() / p.calls_per_run);
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// Registers every (backend, case, variant) this machine can run; says which backends it cannot.
void register_all() {
  std::vector<const TestBackend*> backends;
  for (const TestBackend& b : cpu_test_backends()) backends.push_back(&b);
  for (const TestBackend& b : cuda_test_backends()) backends.push_back(&b);
  for (const TestBackend* b : backends) {
    if (const std::string why = unavailable_reason(*b); !why.empty()) {
      std::cerr << "convoy_op_perf: " << b->name << " not timed: " << why << "\n";
      continue;
    }
    const Ops& ops = shared_backend(*b).ops();
    for (const OpCase& c : all_cases()) {
      if (!b->runs(c.op)) continue;
      for (const Variant& v : c.variants()) {
        if (!c.supported_by(ops, v)) continue;
        benchmark::RegisterBenchmark(benchmark_name(*b, c, v).c_str(), time_case, b, &c, v)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

}  // namespace
}  // namespace convoy::optest

int main(int argc, char** argv) {
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i)
    if (std::strcmp(argv[i], "--perf") != 0) args.push_back(argv[i]);
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  convoy::optest::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
