#pragma once
// `convoy bench`: a suite's cases (model x mode x batch x device x precision) timed on
// Convoy and, in the same run, on its peers (PyTorch, ONNX Runtime); the markdown table on
// stdout, a line per case on stderr, results.json, results.md and the charts in the output
// directory. Method: benchmarks/README.md.
#include <string>
#include <vector>

#include "engine/core/engine_options.h"

namespace convoy {

struct BenchOptions {
  std::string suite;              // the suite YAML
  std::string out = "bench-out";  // directory for results.json, results.md and the charts
  std::string devices;            // comma-separated (cpu, cuda, cuda:N); empty = the suite's
  std::string peers;              // comma-separated (pytorch, pytorch_compiled, onnxruntime) or "none"; empty = the suite's
  bool profile = false;           // per-layer forward and backward times of every case
  bool no_plan = false;           // CPU inference layer by layer (the training graph's forward), not the plan
  bool no_cuda_graphs = false;    // GPU inference and training steps launched op by op, not replayed from CUDA graphs
  std::string precisions;         // comma-separated extra precisions (bf16, int8), rows beside the suite's
  int threads = -1;               // CPU threads; -1 = the suite's, 0 = all cores
  bool quick = false;             // a short timing: a smoke test, not a measurement
  // The whole comparison (Convoy's cases, then the peers') this many times in a row; each row
  // shows every engine's median run, so that a stretch of a busy or throttled machine that
  // slows one engine's turn does not decide the ratio.
  int repeat = 1;
  bool no_chart = false;          // leave plot.py out
  std::string contend;            // --contend: "auto" or N busy processes beside every case; empty = none
  std::vector<std::string> command;  // the command line, recorded in results.json
  std::string source_dir;  // Convoy's source tree: its git commit, and benchmarks/ when not beside the suite
};

// Runs the suite with `engine`'s tunables; returns the exit status: 0, or 1 when a case failed.
// A bad suite or option is an InputError.
int run_bench(const BenchOptions& options, const EngineOptions& engine);

}  // namespace convoy
