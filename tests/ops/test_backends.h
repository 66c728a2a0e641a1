#pragma once
// The backends the op tests, the layer gradient checks and the perf binary run on: the CPU,
// and CUDA device 0 in the configurations whose code paths differ (cuDNN's heuristics instead
// of timing its algorithms; Convoy's batch-norm kernels instead of cuDNN's).
#include <memory>
#include <string>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/ops/ops.h"

namespace convoy::optest {

struct TestBackend {
  std::string name;   // "cpu", "cuda", "cuda_heuristics", ...: letters, digits and '_'
  std::string about;  // what this configuration exercises, for reports
  bool cuda = false;
  BackendOptions options{};
  bool (*covers)(OpKind) = nullptr;             // the ops run on it; nullptr: all

  bool runs(OpKind op) const { return covers == nullptr || covers(op); }
};

// The CPU backend (convoy_tests).
const std::vector<TestBackend>& cpu_test_backends();
// CUDA device 0: "cuda" runs every op; the others only the ops whose path they change
// (convoy_cuda_tests).
const std::vector<TestBackend>& cuda_test_backends();
// CUDA device 0 with deterministic algorithms (gradient checks, repeatability).
const TestBackend& cuda_deterministic_backend();

// Empty when `b` is usable on this machine, else why not (no GPU, no driver, ...).
std::string unavailable_reason(const TestBackend& b);
// One backend per configuration and process, made on first use (cuDNN handles and algorithm
// caches are costly to make and are what the engine reuses across calls too).
Backend& shared_backend(const TestBackend& b);
// The CPU backend GPU results are compared with.
Backend& shared_cpu_backend();

}  // namespace convoy::optest
