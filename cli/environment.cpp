#include "cli/environment.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "engine/core/error.h"

namespace convoy::cli {

namespace {

// A switch that is on unless the variable is "0".
bool on_unless_zero(const char* name) {
  const char* v = std::getenv(name);
  return !(v && std::string_view(v) == "0");
}

// A switch that is off unless the variable is "1".
bool off_unless_one(const char* name) {
  const char* v = std::getenv(name);
  return v && std::string_view(v) == "1";
}

// CONVOY_FAULT_INJECT=device_error@step:N (N >= 1), or 0 when unset or empty.
int64_t fault_inject_step() {
  const char* env = std::getenv("CONVOY_FAULT_INJECT");
  if (!env || !*env) return 0;
  const std::string value = env, prefix = "device_error@step:";
  const std::string digits = value.substr(std::min(prefix.size(), value.size()));
  if (value.compare(0, prefix.size(), prefix) != 0 || digits.empty() || digits.size() > 15 ||
      digits.find_first_not_of("0123456789") != std::string::npos || std::stoll(digits) < 1)
    throw InputError("CONVOY_FAULT_INJECT: expected device_error@step:N with N >= 1 (a test hook that makes the "
                     "device fail at step N), got '" + value + "'");
  return std::stoll(digits);
}

// CONVOY_CUDNN_COMPILED: how many run-time compiled cuDNN engines a fused plan may build and time
// (0 turns them off; unset: the command's default).
std::optional<int> compiled_candidates() {
  const char* v = std::getenv("CONVOY_CUDNN_COMPILED");
  if (!v) return std::nullopt;
  const std::string_view s(v);
  if (s.size() != 1 || s[0] < '0' || s[0] > '9')
    throw InputError("CONVOY_CUDNN_COMPILED: expected 0 (off) or a count of compiled engines per plan from 1 to 9, got '" +
                     std::string(s) + "'");
  return s[0] - '0';
}

}  // namespace

EngineOptions engine_options_from_environment() {
  EngineOptions o;
  o.fusion = on_unless_zero("CONVOY_FUSION");
  o.cuda_graphs = on_unless_zero("CONVOY_CUDA_GRAPHS");
  o.fault_inject_step = fault_inject_step();
  o.cuda.cudnn_graph = on_unless_zero("CONVOY_CUDNN_GRAPH");
  o.cuda.stem_gemm = on_unless_zero("CONVOY_STEM_GEMM");
  o.cuda.cudnn_compiled = compiled_candidates();
  o.cuda.bn_kernels = off_unless_one("CONVOY_CUDA_BN_KERNELS");
  o.cuda.verbose = off_unless_one("CONVOY_CUDA_VERBOSE");
  o.winograd = on_unless_zero("CONVOY_WINOGRAD");
  o.adaptive_team = on_unless_zero("CONVOY_ADAPTIVE_TEAM");
  if (const char* v = std::getenv("CONVOY_BLOCKED_LAYOUT"))  // set at all: the choice is not timed
    o.plan_layout = std::string_view(v) == "0" ? PlanLayout::onednn : PlanLayout::blocked;
  if (const char* v = std::getenv("CONVOY_NVJPEG_BACKEND")) o.nvjpeg_hardware = std::string_view(v) != "default";
  if (const char* v = std::getenv("CONVOY_DATA_VOLUME")) o.data_volume = v;
  return o;
}

// Inference (infer, serve, bench) runs a forward pass as dozens of short parallel regions:
// threads that went to sleep after one cost tens of microseconds each to wake for the next
// (fmnet at batch 1 on 16 cores: 0.74 ms per image passive, 0.23 ms with a spin of 30000). They
// spin this many pauses before sleeping: 30000 (0.1-1 ms) for infer and bench, 3000 for serve,
// whose HTTP and batching threads need the cores between passes (LeNet-5 behind 256 connections
// on 2 cores: 26% fewer images/s with 30000, benchmarks/RESULTS.md). Where other processes
// compete for the cores a spinning team is what collapses (issue 39): the inference plans then
// run smaller teams (TeamChooser), whose threads wait less. nullptr: wait passively, as training
// does from the start: on a busy laptop or beside other jobs, spinning threads made CPU training
// many times slower (benchmarks/RESULTS.md), and a training step's regions are long enough not
// to need it.
const char* openmp_spin_count(const std::string& command) {
  if (command == "serve") return "3000";
  return command == "infer" || command == "bench" ? "30000" : nullptr;
}

}  // namespace convoy::cli
