#include "apps/bench/bench_app.h"

#include <algorithm>

#include "engine/inference/inference_plan.h"
#include "apps/bench/backend_pool.h"
#include "apps/bench/bench_profile.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "apps/bench/bench_repeat.h"
#include "apps/bench/bench_report.h"
#include "apps/bench/bench_runner.h"
#include "apps/bench/bench_suite.h"
#include "apps/bench/contention.h"
#include "apps/bench/shell.h"
#include "engine/backends/backend.h"
#include "engine/core/error.h"
#include "engine/core/usable_cpus.h"
#include "engine/core/file_io.h"
#include "engine/graph/model.h"

namespace convoy {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    item.erase(0, item.find_first_not_of(" "));
    item.erase(item.find_last_not_of(" ") + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// The suite, with --devices and --peers in place of its own lists.
BenchSuite load_suite(const BenchOptions& options, const EngineOptions& engine) {
  BenchSuite suite = load_bench_suite(options.suite);
  if (!options.devices.empty()) {
    suite.devices = split_list(options.devices);
    for (const std::string& d : suite.devices)
      if (d != "cpu" && d != "cuda" && d.rfind("cuda:", 0) != 0)
        throw InputError("--devices: '" + d + "' is not one of: cpu, cuda, cuda:N");
    if (suite.devices.empty()) throw InputError("--devices: give at least one of cpu, cuda, cuda:N");
  }
  if (options.threads >= 0) suite.threads = options.threads;
  for (const std::string& text : split_list(options.precisions)) {  // added as rows, fp32 stays
    const Precision p = parse_precision(text, kBenchPrecisions, "--precision");
    if (std::find(suite.precisions.begin(), suite.precisions.end(), p) == suite.precisions.end())
      suite.precisions.push_back(p);
  }
  suite.cpu_inference_plan = !options.no_plan;
  suite.cuda_graphs = !options.no_cuda_graphs;
  suite.engine = engine;
  if (!options.peers.empty()) {
    suite.peers = options.peers == "none" ? std::vector<std::string>{} : split_list(options.peers);
    for (const std::string& p : suite.peers)
      if (p != "pytorch" && p != "pytorch_compiled" && p != "onnxruntime")
        throw InputError("--peers: '" + p + "' is not one of: pytorch, pytorch_compiled, onnxruntime, none");
  }
  return suite;
}

// The cases, in table order: model, mode, batch, device, precision.
std::vector<BenchCase> list_cases(const BenchSuite& suite) {
  std::vector<BenchCase> cases;
  for (const BenchModel& m : suite.models) {
    const std::string name = Model::from_file(m.path, suite.seed).name();
    for (const std::string mode : {"training", "inference"})
      for (int64_t batch : mode == std::string("training") ? m.training_batches : m.inference_batches)
        for (const std::string& device : suite.devices)
          for (Precision precision : suite.precisions)
            cases.push_back({m.path, name, mode, batch, device, precision});
  }
  return cases;
}

// CPU bf16 and int8 run the inference plan only; peers are measured in fp32 (their rows compare).
bool cpu_reduced(const BenchCase& c) { return c.device == "cpu" && c.precision != Precision::fp32; }

std::string case_label(const BenchCase& c) {
  return c.model + " " + c.mode + " b" + std::to_string(c.batch) + " " + c.device + " " + to_string(c.precision);
}

json timing_json(const BenchTiming& t) {
  return {{"warmup_iterations", t.warmup_iterations}, {"warmup_seconds", t.warmup_seconds},
          {"round_seconds", t.round_seconds},         {"min_rounds", t.min_rounds},
          {"max_rounds", t.max_rounds},               {"stable_spread", t.stable_spread},
          {"max_seconds", t.max_seconds},             {"latency_samples", t.latency_samples},
          {"latency_seconds", t.latency_seconds}};
}

CpuPeak cpu_peak_of_this_machine(int64_t threads) {
  std::ifstream in("/proc/cpuinfo");
  std::stringstream text;
  text << in.rdbuf();
  return estimate_cpu_peak(text.str(), threads);
}

// The Python that runs the peers and the chart: $CONVOY_PYTHON, else the first of Debian's
// (python3-torch, python3-matplotlib) and the python3 on PATH that has torch (looked up,
// not imported: importing torch takes seconds), else Debian's, else python3.
std::string python_command() {
  if (const char* p = std::getenv("CONVOY_PYTHON"); p && *p) return p;
  const bool debian = fs::exists("/usr/bin/python3");
  for (const std::string py : {"/usr/bin/python3", "python3"}) {
    if (py == "/usr/bin/python3" && !debian) continue;
    const std::string probe = py + " -c \"import importlib.util, sys; "
                              "sys.exit(0 if importlib.util.find_spec('torch') else 1)\" >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return py;
  }
  return debian ? "/usr/bin/python3" : "python3";
}

// benchmarks/ (peers/, plot.py): $CONVOY_BENCH_DIR, beside the suite, or in the source tree.
fs::path bench_dir(const std::string& suite_path, const std::string& source_dir) {
  std::vector<fs::path> candidates;
  if (const char* d = std::getenv("CONVOY_BENCH_DIR"); d && *d) candidates.emplace_back(d);
  candidates.push_back(fs::absolute(suite_path).parent_path().parent_path());
  if (!source_dir.empty()) candidates.push_back(fs::path(source_dir) / "benchmarks");
  for (const fs::path& c : candidates)
    if (fs::exists(c / "peers" / "pytorch_bench.py")) return c;
  return {};
}

// The peak a case's TFLOP/s is compared with, where it comes from, and the device's name.
struct CasePeak {
  double tflops = 0;  // 0: unknown
  std::string note;
  std::string device_name;
};

CasePeak case_peak(const BenchCase& c, const Backend& backend, const BenchSuite& suite, const CpuPeak& cpu_peak) {
  CasePeak peak;
  if (backend.device().is_cuda()) {
    peak.device_name = gpu_name_from_describe(backend.describe());
    if (auto p = gpu_peak_tflops(suite.gpu_peaks, peak.device_name, c.precision)) {
      peak.tflops = *p;
      peak.note = peak.device_name + " dense " + to_string(c.precision) + " datasheet peak " +
                  bench_format_sig(peak.tflops) + " TFLOP/s" +
                  (c.precision == Precision::fp32   ? " (FMA pipes; Convoy's fp32 uses no TF32)"
                   : c.precision == Precision::tf32 ? " (tensor cores)"
                                                    : "");
    } else {
      peak.note = "no peak known for '" + peak.device_name + "' (add it under peaks.gpus in the suite)";
    }
  } else {
    peak.device_name = cpu_peak.model_name;
    if (suite.cpu_peak_tflops > 0) {
      peak.tflops = suite.cpu_peak_tflops;
      peak.note = "CPU fp32 peak from the suite: " + bench_format_sig(peak.tflops) + " TFLOP/s";
    } else {
      peak.tflops = cpu_peak.tflops;
      peak.note = "CPU fp32 peak estimate: " + cpu_peak.assumption;
    }
  }
  return peak;
}

// One run of a suite: Convoy's cases, the peers', and the report, sharing what they found.
class SuiteRun {
 public:
  SuiteRun(const BenchOptions& options, const EngineOptions& engine)
      : options_(options), suite_(load_suite(options, engine)),
        timing_(options.quick ? quick_bench_timing() : suite_.timing), out_dir_(options.out),
        contend_(options.contend.empty() ? 0 : parse_contend(options.contend, usable_cpus())) {
    if (options.profile) timing_.profile_steps = 5;
  }

  int run();

 private:
  void run_convoy_case(size_t i, const std::string& of_round);
  void run_interleaved(int round);
  void keep_median_runs();
  json run_case(const BenchCase& c);
  void run_peers(const std::vector<BenchCase>& cases);
  json peer_request(const std::vector<BenchCase>& cases) const;
  void read_peer_records(const std::string& output, int status);
  void choose_peer_columns();
  json convoy_over_peers() const;
  void note_machine_load();
  fs::path write_results_json(const json& ratios) const;
  void draw_charts(const fs::path& json_path);

  const BenchOptions& options_;
  BenchSuite suite_;
  BenchTiming timing_;
  fs::path out_dir_;
  std::vector<BenchCase> cases_;
  json env_;
  int64_t threads_used_ = 0;
  int contend_ = 0;  // busy processes beside every case (--contend)
  CpuPeak cpu_peak_;
  std::unique_ptr<BackendPool> backends_;
  json records_ = json::array();
  int failed_ = 0;
  std::string python_;
  fs::path bench_dir_;  // empty when not found
  std::vector<std::string> peer_engines_;  // the peers that get columns
  std::vector<std::string> notes_;
};

int SuiteRun::run() {
  create_output_directories(out_dir_, "the output directory");
  // Written at the end, but refused now (a directory, a device in the way) rather than after the suite.
  for (const char* name : {"results.json", "results.md", "peer_cases.json", "speedup.png", "throughput.png"})
    check_output_target(out_dir_ / name, std::string("the bench's ") + name);
  cases_ = list_cases(suite_);
  backends_ = std::make_unique<BackendPool>(suite_.threads, suite_.engine.cuda);
  env_ = bench_environment(options_.source_dir, suite_.threads);
  threads_used_ = env_.value("threads", 0);
  cpu_peak_ = cpu_peak_of_this_machine(threads_used_);

  std::cerr << "convoy bench: " << cases_.size() << " cases from " << options_.suite
            << (options_.quick ? " (quick timing)" : "") << "; results in " << out_dir_.string() << "/" << std::endl;
  python_ = python_command();
  bench_dir_ = bench_dir(options_.suite, options_.source_dir);
  std::unique_ptr<ContendingLoad> load;
  if (contend_ > 0) {  // each ends itself past a generous bound on the whole run, should the bench hang
    const double per_case = timing_.max_seconds + timing_.latency_seconds + 60;
    load = std::make_unique<ContendingLoad>(
        contend_, static_cast<unsigned>(600 + per_case * static_cast<double>(cases_.size() * options_.repeat) *
                                                  static_cast<double>(1 + suite_.peers.size())));
    env_["contend"] = {{"processes", contend_}, {"pids", load->pids()}};
    std::cerr << "convoy bench: " << contend_ << " busy process(es) beside every case, pids";
    for (pid_t pid : load->pids()) std::cerr << " " << pid;
    std::cerr << std::endl;
  }
  if (options_.repeat == 1) {
    for (size_t i = 0; i < cases_.size(); ++i) run_convoy_case(i, "");
    if (!suite_.peers.empty()) run_peers(cases_);
  } else {
    for (int round = 1; round <= options_.repeat; ++round) run_interleaved(round);
  }
  if (load) load->stop();
  keep_median_runs();
  choose_peer_columns();
  const json ratios = convoy_over_peers();
  note_machine_load();
  notes_.push_back("CPU peak: " + (suite_.cpu_peak_tflops > 0
                                       ? bench_format_sig(suite_.cpu_peak_tflops) + " TFLOP/s from the suite"
                                       : cpu_peak_.assumption));
  notes_.push_back("FLOPs from the model graph (Model::forward_flops, 2 per multiply-add, pooling/activations/BN "
                   "included); a training step counts 3x the forward. Those of a direct convolution: the CPU's "
                   "Winograd convolutions multiply 2.25x less, so a CPU row can pass 100% of peak");
  const fs::path json_path = write_results_json(ratios);
  draw_charts(json_path);
  notes_.push_back("results: " + json_path.string());

  std::string md = bench_markdown(suite_, env_, records_, peer_engines_, notes_);
  if (contend_ > 0) md += contention_markdown(records_, peer_engines_, contend_, usable_cpus());
  write_file_atomically(out_dir_ / "results.md", "the results table", md);
  std::cout << md << std::flush;
  if (failed_) {
    std::cerr << "convoy bench: " << failed_ << " case(s) failed (see the table)" << std::endl;
    return 1;
  }
  return 0;
}

void SuiteRun::run_convoy_case(size_t i, const std::string& of_round) {
  const BenchCase& c = cases_[i];
  std::cerr << "[" << i + 1 << "/" << cases_.size() << "]" << of_round << " " << case_label(c) << ": " << std::flush;
  json rec = run_case(c);
  std::cerr << bench_case_line(rec) << std::endl;
  if (rec.contains("profile")) std::cerr << profile_table(rec.at("profile"), 15) << std::flush;
  records_.push_back(std::move(rec));
}

// One run of --repeat: each case's engines back to back, so that a slow stretch of the machine
// (minutes long on the 16-core host) falls on both sides of a comparison, not on one engine's
// whole pass over the suite; Convoy goes first in odd runs, the peers in even ones.
void SuiteRun::run_interleaved(int round) {
  const std::string of_round = " (run " + std::to_string(round) + "/" + std::to_string(options_.repeat) + ")";
  const bool peers_first = round % 2 == 0;
  for (size_t i = 0; i < cases_.size(); ++i) {
    const bool peers = !suite_.peers.empty() && !peer_request({cases_[i]}).at("cases").empty();
    if (peers && peers_first) run_peers({cases_[i]});
    run_convoy_case(i, of_round);
    if (peers && !peers_first) run_peers({cases_[i]});
  }
}

json SuiteRun::run_case(const BenchCase& c) {
  if (c.device == "cpu" && !infers_in(c.precision, DeviceKind::cpu))
    return skipped_bench_record(c, c.precision == Precision::tf32
                                       ? "tf32 is a GPU math mode (the CPU path computes fp32 exactly: its fp32 rows)"
                                       : "fp8 runs on GPUs only (FP8 tensor cores; the CPU's 8-bit rows are int8)");
  if (cpu_reduced(c) && c.mode == "training")
    return skipped_bench_record(
        c, std::string(to_string(c.precision)) + " on the CPU is an inference precision (the training path computes in fp32)");
  if (cpu_reduced(c) && !suite_.cpu_inference_plan)
    return skipped_bench_record(c, std::string(to_string(c.precision)) +
                                       " on the CPU runs through the inference plan only (--no-plan)");
  if (c.device == "cpu" && c.precision == Precision::bf16)
    if (const std::string why = bf16_unsupported_reason(); !why.empty()) return skipped_bench_record(c, why);
  if (c.device != "cpu" && is_eight_bit(c.precision) && c.mode == "training")
    return skipped_bench_record(c, std::string(to_string(c.precision)) + " is an inference precision (8-bit plans)");
  Backend* backend = backends_->get(c.device, c.precision == Precision::tf32);
  if (!backend) return skipped_bench_record(c, backends_->why_unusable(c.device));
  const CasePeak peak = case_peak(c, *backend, suite_, cpu_peak_);
  return run_bench_case(*backend, suite_, c, timing_, peak.tflops, peak.note, peak.device_name);
}

// Peers, in the same run: one Python process for all of `cases`.
void SuiteRun::run_peers(const std::vector<BenchCase>& cases) {
  const fs::path request_path = out_dir_ / "peer_cases.json";
  write_file_atomically(request_path, "the peers' cases", peer_request(cases).dump(2) + "\n");
  if (bench_dir_.empty()) {
    notes_.push_back("peers missing: benchmarks/peers/pytorch_bench.py not found (set CONVOY_BENCH_DIR)");
  } else {
    const fs::path script = bench_dir_ / "peers" / "pytorch_bench.py";
    std::cerr << "peers (" << python_ << " " << script.string() << "):" << std::endl;
    const ShellResult r = shell_run(shell_quote(python_) + " " + shell_quote(script.string()) + " --cases " +
                                    shell_quote(request_path.string()));
    read_peer_records(r.output, r.status);
  }
}

// With --repeat: one record per engine and case, its median run (median_runs). Then counts
// Convoy's failed cases.
void SuiteRun::keep_median_runs() {
  if (options_.repeat > 1) {
    std::vector<std::string> far_apart;
    records_ = median_runs(records_, far_apart);
    notes_.push_back("every figure is the median of " + std::to_string(options_.repeat) +
                     " runs (--repeat: each case's engines back to back, Convoy first in odd runs, the peers "
                     "in even ones); each run's images/s are in results.json "
                     "(runs_images_per_second)");
    if (!far_apart.empty()) {
      std::string line = "runs more than 25% apart (img/s, slowest-fastest):";
      for (const std::string& s : far_apart) line += " " + s + ";";
      line.pop_back();
      notes_.push_back(line);
    }
    // A peer that failed in every run said so once per run.
    std::vector<std::string> once;
    for (std::string& n : notes_)
      if (std::find(once.begin(), once.end(), n) == once.end()) once.push_back(std::move(n));
    notes_ = std::move(once);
  }
  failed_ = 0;
  for (const json& r : records_)
    if (r.value("engine", "") == "convoy" && r.value("status", "") == "failed") ++failed_;
}

json SuiteRun::peer_request(const std::vector<BenchCase>& cases) const {
  json peer_cases = json::array();
  for (const BenchCase& c : cases)
    if (!cpu_reduced(c) && !is_eight_bit(c.precision))
      peer_cases.push_back({{"model_path", fs::absolute(c.model_path).string()}, {"model", c.model},
                            {"mode", c.mode}, {"batch", c.batch}, {"device", c.device}, {"precision", to_string(c.precision)}});
  return {{"peers", suite_.peers}, {"compile_modes", suite_.peer_compile_modes}, {"cases", peer_cases},
          {"timing", timing_json(timing_)}, {"threads", threads_used_}, {"seed", suite_.seed},
          {"input_sets", suite_.input_sets},
          {"channels_last", suite_.gpu_layout == "nhwc"},
          {"optimizer", {{"lr", suite_.optimizer.lr}, {"momentum", suite_.optimizer.momentum},
                         {"nesterov", suite_.optimizer.nesterov},
                         {"weight_decay", suite_.optimizer.weight_decay}}},
          {"label_smoothing", suite_.label_smoothing},
          {"augment", {{"crop_padding", suite_.crop_padding}, {"horizontal_flip", suite_.horizontal_flip}}},
          {"normalize", {{"mean", suite_.mean}, {"std", suite_.std}}}};
}

// pytorch_bench.py prints one JSON record per line among its other output.
void SuiteRun::read_peer_records(const std::string& output, int status) {
  int got = 0;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    try {
      json r = json::parse(line);
      if (!r.contains("engine")) continue;
      records_.push_back(std::move(r));
      ++got;
    } catch (const json::exception&) {
    }
  }
  if (status != 0 && got == 0)
    notes_.push_back("peers missing: " + python_ + " pytorch_bench.py exited with status " + std::to_string(status) +
                     (status == 127 ? " (no such Python: set CONVOY_PYTHON)" : "") + " and reported nothing");
}

void SuiteRun::choose_peer_columns() {
  for (const std::string& e : suite_.peers) {
    bool any = false;
    for (const json& r : records_) any = any || r.value("engine", "") == e;
    if (any) peer_engines_.push_back(e);
    // An engine reported only as missing gets one line, not a column of blanks.
    bool all_missing = any;
    std::string why;
    for (const json& r : records_)
      if (r.value("engine", "") == e) {
        all_missing = all_missing && r.value("status", "") == "missing";
        why = r.value("reason", "");
      }
    if (any && all_missing) {
      peer_engines_.pop_back();
      notes_.push_back(std::string(bench_peer_title(e)) + ": missing (" + why + ")");
    }
  }
}

// Convoy over each peer, where both measured the same case.
json SuiteRun::convoy_over_peers() const {
  json ratios = json::array();
  for (const json& r : records_) {
    if (r.value("engine", "") != "convoy" || r.value("status", "") != "ok") continue;
    for (const json& p : records_)
      if (p.value("engine", "") != "convoy" && p.value("status", "") == "ok" && bench_case_key(p) == bench_case_key(r))
        ratios.push_back({{"model", r["model"]}, {"mode", r["mode"]}, {"batch", r["batch"]},
                          {"device", r["device"]}, {"precision", r["precision"]}, {"peer", p["engine"]},
                          {"convoy_images_per_second", r["images_per_second"]},
                          {"peer_images_per_second", p["images_per_second"]},
                          {"ratio", bench_number(r, "images_per_second") / bench_number(p, "images_per_second")}});
  }
  return ratios;
}

// A busy machine skews CPU figures (and OpenMP spin-waiting makes it much worse): say so.
void SuiteRun::note_machine_load() {
  if (!env_["loadavg"].is_string() || threads_used_ <= 0) return;
  const double load = std::atof(env_["loadavg"].get<std::string>().c_str());
  const auto cores = static_cast<double>(usable_cpus());
  if (load > 0.5 * cores)
    notes_.push_back("warning: load average " + bench_format_fixed(load, 2) + " at the start on " +
                     bench_format_fixed(cores, 0) +
                     " usable CPUs: other work competes with the CPU cases, whose figures are skewed");
}

fs::path SuiteRun::write_results_json(const json& ratios) const {
  const json result = {{"schema", "convoy-bench-1"},
                       {"suite", options_.suite},
                       {"suite_name", suite_.name},
                       {"command", options_.command},
                       {"quick", options_.quick},
                       {"profile", options_.profile},
                       {"python", python_},
                       {"timing", timing_json(timing_)},
                       {"environment", env_},
                       {"cpu_peak", {{"tflops", cpu_peak_.tflops}, {"cores", cpu_peak_.cores}, {"ghz", cpu_peak_.ghz},
                                     {"flops_per_cycle", cpu_peak_.flops_per_cycle},
                                     {"assumption", cpu_peak_.assumption},
                                     {"suite_override_tflops", suite_.cpu_peak_tflops}}},
                       {"records", records_},
                       {"ratios", ratios}};
  const fs::path path = out_dir_ / "results.json";
  write_file_atomically(path, "the results", result.dump(2) + "\n");
  return path;
}

// The chart (and a throughput chart that needs no GPU), by plot.py with matplotlib.
void SuiteRun::draw_charts(const fs::path& json_path) {
  if (options_.no_chart) {
    notes_.push_back("charts not drawn (--no-chart)");
    return;
  }
  if (bench_dir_.empty()) {
    notes_.push_back("chart skipped: benchmarks/plot.py not found (set CONVOY_BENCH_DIR)");
    return;
  }
  // The peers' Python (CONVOY_PYTHON) may lack matplotlib where Debian's has it: try both.
  ShellResult r;
  for (const std::string& py : {python_, std::string("/usr/bin/python3")}) {
    r = shell_run(shell_quote(py) + " " + shell_quote((bench_dir_ / "plot.py").string()) + " " +
                  shell_quote(json_path.string()) + " --out " + shell_quote(out_dir_.string()));
    if (r.status != 3 || py == "/usr/bin/python3" || !fs::exists("/usr/bin/python3")) break;
  }
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) notes_.push_back((r.status == 0 ? "" : "chart skipped: ") + line);
  if (r.status != 0 && r.output.empty())
    notes_.push_back("chart skipped: " + python_ + " plot.py exited with status " + std::to_string(r.status));
}

}  // namespace

int run_bench(const BenchOptions& options, const EngineOptions& engine) { return SuiteRun(options, engine).run(); }

}  // namespace convoy
