// convoy bench --suite benchmarks/suites/default.yaml [--out DIR] [--devices cuda,cpu] [--quick] [--profile]
// Training and inference throughput and latency per model x batch x device x precision,
// against PyTorch (and ONNX Runtime on the CPU) measured in the same run: a markdown table
// on stdout, results.json and a GPU-over-CPU chart in --out. The app is apps/bench.
#include <memory>

#include "apps/bench/bench_app.h"
#include "cli/commands.h"

namespace convoy::cli {

namespace {

// The command as given, less defaults, for results.json.
std::vector<std::string> bench_command_line(const BenchOptions& o) {
  std::vector<std::string> argv = {"convoy", "bench", "--suite", o.suite, "--out", o.out};
  if (!o.devices.empty()) argv.insert(argv.end(), {"--devices", o.devices});
  if (!o.peers.empty()) argv.insert(argv.end(), {"--peers", o.peers});
  if (o.threads >= 0) argv.insert(argv.end(), {"--threads", std::to_string(o.threads)});
  if (!o.precisions.empty()) argv.insert(argv.end(), {"--precision", o.precisions});
  if (o.no_plan) argv.push_back("--no-plan");
  if (o.no_cuda_graphs) argv.push_back("--no-cuda-graphs");
  if (o.repeat != 1) argv.insert(argv.end(), {"--repeat", std::to_string(o.repeat)});
  if (o.quick) argv.push_back("--quick");
  if (o.profile) argv.push_back("--profile");
  if (o.no_chart) argv.push_back("--no-chart");
  if (!o.contend.empty()) argv.insert(argv.end(), {"--contend", o.contend});
  return argv;
}

}  // namespace

void add_bench_command(CLI::App& app, Action& chosen) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "Benchmark training and inference, GPU against CPU and PyTorch");
  cmd->add_option("--suite,-s", options->suite, "suite YAML, e.g. benchmarks/suites/default.yaml")->required();
  cmd->add_option("--out,-o", options->out, "directory for results.json, results.md and the charts")
      ->default_str("bench-out");
  cmd->add_option("--devices", options->devices, "comma-separated devices to run (cuda, cuda:N, cpu); default: the suite's");
  cmd->add_option("--peers", options->peers,
                  "comma-separated peers (pytorch, pytorch_compiled, onnxruntime) or 'none'; default: the suite's");
  cmd->add_option("--threads", options->threads,
                  "CPU threads for Convoy and its peers (0 = all cores; default: the suite's)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--precision", options->precisions,
                  "extra precisions as separate rows beside the suite's (CPU inference: bf16, int8; fp32 stays)");
  cmd->add_flag("--no-plan", options->no_plan, "CPU inference layer by layer, not through the compiled inference plan");
  cmd->add_flag("--no-cuda-graphs", options->no_cuda_graphs,
                "GPU work launched op by op, not replayed from CUDA graphs (inference: one per batch size; "
                "training: each step's forward and backward)");
  cmd->add_option("--repeat", options->repeat,
                  "run the comparison N times, each case's engines back to back (Convoy first in odd runs, the "
                  "peers in even ones), and show each engine's median run per case, with the spread in "
                  "results.json (a noisy or shared machine)")
      ->check(CLI::Range(1, 100));
  cmd->add_flag("--quick", options->quick, "short timing (a few rounds per case): a smoke test, not a measurement");
  cmd->add_flag("--profile", options->profile,
                 "also time every layer's forward and backward (5 synchronized steps per case) and print the slowest; "
                 "on a GPU also the slowest kernels of 5 more steps (CUPTI)");
  cmd->add_flag("--no-chart", options->no_chart, "do not run plot.py");
  cmd->add_option("--contend", options->contend,
                  "run every case (Convoy's and the peers') beside N busy processes that the bench starts and "
                  "stops itself: 'auto' is one per two usable CPUs; adds a table of img/s, p50, p99 and the ratios");
  cmd->callback([options, &chosen] {
    options->command = bench_command_line(*options);
    options->source_dir = CONVOY_SOURCE_DIR;
    chosen = [options](const EngineOptions& engine) { return run_bench(*options, engine); };
  });
}

}  // namespace convoy::cli
