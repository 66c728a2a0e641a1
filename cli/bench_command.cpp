// convoy bench --suite benchmarks/suites/default.yaml [--out DIR] [--devices cuda,cpu] [--quick]
// Training and inference throughput and latency per model x batch x device x precision,
// against PyTorch (and ONNX Runtime on the CPU) measured in the same run: a markdown table
// on stdout, results.json and a GPU-over-CPU chart in --out. Method: benchmarks/README.md.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "engine/backends/backend.h"
#include "engine/core/error.h"
#include "engine/graph/model.h"
#include "apps/bench/bench_runner.h"
#include "apps/bench/bench_suite.h"

namespace convoy::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct BenchArgs {
  std::string suite;
  std::string out = "bench-out";
  std::string devices;  // comma-separated; empty = the suite's
  std::string peers;    // comma-separated, or "none"; empty = the suite's
  bool quick = false;
  bool no_chart = false;
  std::vector<std::string> argv;
};

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

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

// Runs a command with stderr passed through (progress) and returns its stdout.
std::string run_capture(const std::string& command, int& status) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) {
    status = -1;
    return out;
  }
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  const int raw = pclose(pipe);
  status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  return out;
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
fs::path bench_dir(const std::string& suite_path) {
  std::vector<fs::path> candidates;
  if (const char* d = std::getenv("CONVOY_BENCH_DIR"); d && *d) candidates.emplace_back(d);
  candidates.push_back(fs::absolute(suite_path).parent_path().parent_path());
  candidates.push_back(fs::path(CONVOY_SOURCE_DIR) / "benchmarks");
  for (const fs::path& c : candidates)
    if (fs::exists(c / "peers" / "pytorch_bench.py")) return c;
  return {};
}

std::string case_label(const BenchCase& c) {
  return c.model + " " + c.mode + " b" + std::to_string(c.batch) + " " + c.device + " " + c.precision;
}

std::string fmt(double v, int digits) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(digits) << v;
  return o.str();
}

// Three significant figures, at most 1 decimal place above 100.
std::string fmt_sig(double v) {
  if (!std::isfinite(v)) return "n/a";
  const double a = std::fabs(v);
  if (a >= 100) return fmt(v, 0);
  if (a >= 10) return fmt(v, 1);
  if (a >= 1) return fmt(v, 2);
  if (a >= 0.01) return fmt(v, 3);
  std::ostringstream o;
  o << std::setprecision(2) << v;
  return o.str();
}

double num(const json& rec, const char* key) {
  auto it = rec.find(key);
  return it != rec.end() && it->is_number() ? it->get<double>() : NAN;
}

std::string key_of(const json& r) {
  return r.value("model", "") + "|" + r.value("mode", "") + "|" + std::to_string(r.value("batch", 0)) + "|" +
         r.value("device", "") + "|" + r.value("precision", "");
}

std::string result_line(const json& rec) {
  const std::string status = rec.value("status", "");
  if (status != "ok") return status + ": " + rec.value("reason", "");
  std::string s = fmt_sig(num(rec, "images_per_second")) + " img/s, p50 " + fmt_sig(num(rec, "p50_ms")) +
                  " ms, p99 " + fmt_sig(num(rec, "p99_ms")) + " ms, " + fmt_sig(num(rec, "tflops")) + " TFLOP/s";
  if (rec.contains("fraction_of_peak") && rec["fraction_of_peak"].is_number())
    s += " (" + fmt(100 * num(rec, "fraction_of_peak"), 1) + "% of peak)";
  s += ", " + std::to_string(rec.value("rounds", 0)) + " rounds x " +
       std::to_string(rec.value("iterations_per_round", 0)) + (rec.value("stable", false) ? ", stable" : "") +
       (rec.value("stable", false) ? "" : ", NOT stable (spread " + fmt(100 * num(rec, "spread"), 1) + "%)");
  return s;
}

const char* peer_title(const std::string& engine) {
  if (engine == "pytorch") return "PyTorch";
  if (engine == "pytorch_compiled") return "PyTorch compiled";
  if (engine == "onnxruntime") return "ONNX Runtime";
  return "peer";
}

// Markdown: the environment, the main table, the GPU-over-CPU speedups, the notes.
std::string markdown(const BenchSuite& suite, const json& env, const json& records,
                     const std::vector<std::string>& peer_engines, const std::vector<std::string>& notes) {
  std::ostringstream md;
  md << "## convoy bench: suite " << suite.name << " (" << suite.source << ")\n\n";
  md << "- date: " << env.value("date", "") << "; convoy " << env.value("convoy_version", "") << ", commit "
     << (env["git_commit"].is_string() ? env["git_commit"].get<std::string>().substr(0, 12) : std::string("unknown"))
     << (env.value("git_dirty", false) ? " (uncommitted changes)" : "") << "\n";
  md << "- CPU: " << (env["cpu_model"].is_string() ? env["cpu_model"].get<std::string>() : "unknown") << ", "
     << env.value("threads", 0) << " threads; oneDNN "
     << (env["onednn"].is_string() ? env["onednn"].get<std::string>() : "unknown") << "; load average at start "
     << (env["loadavg"].is_string() ? env["loadavg"].get<std::string>() : "unknown");
  if (env.contains("threading_env"))
    for (const auto& [name, value] : env["threading_env"].items()) md << "; " << name << "=" << value.get<std::string>();
  md << "\n";
  if (env["gpu"].is_string())
    md << "- GPU: " << env["gpu"].get<std::string>() << "; driver "
       << (env["nvidia_driver"].is_string() ? env["nvidia_driver"].get<std::string>() : "?") << " ("
       << (env["cuda_driver"].is_string() ? env["cuda_driver"].get<std::string>() : "?") << "); CUDA runtime "
       << (env["cuda_runtime"].is_string() ? env["cuda_runtime"].get<std::string>() : "?") << "; cuDNN "
       << (env["cudnn"].is_string() ? env["cudnn"].get<std::string>() : "?") << "\n";
  else
    md << "- GPU: none usable ("
       << (env["gpu_unavailable_reason"].is_string() ? env["gpu_unavailable_reason"].get<std::string>() : "?") << ")\n";
  md << "\n";

  std::map<std::string, const json*> peers;  // engine|key -> record
  for (const json& r : records)
    if (r.value("engine", "") != "convoy") peers[r.value("engine", "") + "#" + key_of(r)] = &r;

  std::map<std::string, std::string> footnotes;  // reason -> [n]
  auto note = [&](const std::string& reason) {
    auto it = footnotes.find(reason);
    if (it == footnotes.end()) it = footnotes.emplace(reason, "[" + std::to_string(footnotes.size() + 1) + "]").first;
    return it->second;
  };

  md << "| model | mode | batch | device | precision | img/s | p50 ms | p99 ms | TFLOP/s | % of peak |";
  for (const std::string& e : peer_engines) md << " " << peer_title(e) << " img/s | Convoy / " << peer_title(e) << " |";
  md << "\n|---|---|---:|---|---|---:|---:|---:|---:|---:|";
  for (size_t i = 0; i < peer_engines.size(); ++i) md << "---:|---:|";
  md << "\n";
  for (const json& r : records) {
    if (r.value("engine", "") != "convoy") continue;
    md << "| " << r.value("model", "") << " | " << r.value("mode", "") << " | " << r.value("batch", 0) << " | "
       << r.value("device", "") << " | " << r.value("precision", "") << " | ";
    const std::string status = r.value("status", "");
    const bool ok = status == "ok";
    if (ok) {
      md << fmt_sig(num(r, "images_per_second")) << (r.value("stable", false) ? "" : " (unstable)") << " | "
         << fmt_sig(num(r, "p50_ms")) << " | " << fmt_sig(num(r, "p99_ms")) << " | " << fmt_sig(num(r, "tflops"))
         << " | "
         << (r["fraction_of_peak"].is_number() ? fmt(100 * num(r, "fraction_of_peak"), 1) + "%" : std::string("n/a"))
         << " |";
    } else {
      md << status << " " << note(r.value("device", "") + ": " + r.value("reason", ""))
         << " | | | | |";
    }
    for (const std::string& e : peer_engines) {
      auto it = peers.find(e + "#" + key_of(r));
      if (it == peers.end()) {
        md << " | |";
        continue;
      }
      const json& p = *it->second;
      if (p.value("status", "") != "ok") {
        md << " " << p.value("status", "") << " "
           << note(std::string(peer_title(e)) + " on " + p.value("device", "") + ": " + p.value("reason", ""))
           << " | |";
        continue;
      }
      md << " " << fmt_sig(num(p, "images_per_second")) << " | "
         << (ok ? fmt(num(r, "images_per_second") / num(p, "images_per_second"), 2) + "x" : std::string("")) << " |";
    }
    md << "\n";
  }

  // GPU over CPU: the same model, mode and batch; CPU fp32 as the base.
  std::ostringstream speed;
  for (const json& g : records) {
    if (g.value("engine", "") != "convoy" || g.value("status", "") != "ok" || g.value("device", "").rfind("cuda", 0) != 0)
      continue;
    for (const json& c : records)
      if (c.value("engine", "") == "convoy" && c.value("status", "") == "ok" && c.value("device", "") == "cpu" &&
          c.value("precision", "") == "fp32" && c.value("model", "") == g.value("model", "") &&
          c.value("mode", "") == g.value("mode", "") && c.value("batch", 0) == g.value("batch", 0))
        speed << "| " << g.value("model", "") << " | " << g.value("mode", "") << " | " << g.value("batch", 0) << " | "
              << g.value("precision", "") << " | "
              << fmt(num(g, "images_per_second") / num(c, "images_per_second"), 1) << "x |\n";
  }
  if (!speed.str().empty())
    md << "\nGPU over CPU (Convoy, GPU images/s over CPU fp32 images/s):\n\n"
       << "| model | mode | batch | GPU precision | speedup |\n|---|---|---:|---|---:|\n"
       << speed.str();

  if (!footnotes.empty()) {
    std::vector<std::pair<std::string, std::string>> ordered;
    for (const auto& [reason, tag] : footnotes) ordered.emplace_back(tag, reason);
    std::sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) {
      return std::stoi(a.first.substr(1)) < std::stoi(b.first.substr(1));
    });
    md << "\n";
    for (const auto& [tag, reason] : ordered) md << tag << " " << reason << "\n";
  }
  if (!notes.empty()) {
    md << "\n";
    for (const std::string& n : notes) md << "- " << n << "\n";
  }
  return md.str();
}

int run_bench(const BenchArgs& args) {
  BenchSuite suite = load_bench_suite(args.suite);
  if (!args.devices.empty()) {
    suite.devices = split_list(args.devices);
    for (const std::string& d : suite.devices)
      if (d != "cpu" && d != "cuda" && d.rfind("cuda:", 0) != 0)
        throw InputError("--devices: '" + d + "' is not one of: cpu, cuda, cuda:N");
    if (suite.devices.empty()) throw InputError("--devices: give at least one of cpu, cuda, cuda:N");
  }
  if (!args.peers.empty()) {
    suite.peers = args.peers == "none" ? std::vector<std::string>{} : split_list(args.peers);
    for (const std::string& p : suite.peers)
      if (p != "pytorch" && p != "pytorch_compiled" && p != "onnxruntime")
        throw InputError("--peers: '" + p + "' is not one of: pytorch, pytorch_compiled, onnxruntime, none");
  }
  const BenchTiming timing = args.quick ? quick_bench_timing() : suite.timing;
  const fs::path out_dir(args.out);
  fs::create_directories(out_dir);

  // The cases, in table order: model, mode, batch, device, precision.
  std::vector<BenchCase> cases;
  for (const BenchModel& m : suite.models) {
    const std::string name = Model::from_file(m.path, suite.seed).name();
    for (const std::string mode : {"training", "inference"})
      for (int64_t batch : mode == std::string("training") ? m.training_batches : m.inference_batches)
        for (const std::string& device : suite.devices)
          for (const std::string& precision : suite.precisions)
            cases.push_back({m.path, name, mode, batch, device, precision});
  }

  BackendOptions options;
  options.threads = static_cast<int>(suite.threads);
  std::map<std::string, std::unique_ptr<Backend>> backends;
  std::map<std::string, std::string> unusable;  // device -> why
  auto backend_for = [&](const std::string& device) -> Backend* {
    if (auto it = backends.find(device); it != backends.end()) return it->second.get();
    if (unusable.count(device)) return nullptr;
    try {
      std::ostringstream log;
      if (device == "cpu") {
        backends[device] = make_cpu_backend(options);
      } else {
        const std::string why = cuda_unavailable_reason();
        if (!why.empty()) throw DeviceError(why);
        backends[device] = select_backend(device, options, log);
      }
      return backends[device].get();
    } catch (const Error& e) {
      unusable[device] = e.what();
      return nullptr;
    }
  };

  const json env = bench_environment(CONVOY_SOURCE_DIR, suite.threads);
  const int64_t threads_used = env.value("threads", 0);
  const CpuPeak cpu_peak = [&] {
    std::ifstream in("/proc/cpuinfo");
    std::stringstream text;
    text << in.rdbuf();
    return estimate_cpu_peak(text.str(), threads_used);
  }();

  std::cerr << "convoy bench: " << cases.size() << " cases from " << args.suite
            << (args.quick ? " (quick timing)" : "") << "; results in " << out_dir.string() << "/" << std::endl;
  json records = json::array();
  int failed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const BenchCase& c = cases[i];
    std::cerr << "[" << i + 1 << "/" << cases.size() << "] " << case_label(c) << ": " << std::flush;
    json rec;
    Backend* backend = nullptr;
    if (c.device == "cpu" && c.precision == "bf16") {
      rec = skipped_bench_record(c, "bf16 is a GPU precision: the CPU path (oneDNN) computes in fp32 only");
    } else if (!(backend = backend_for(c.device))) {
      rec = skipped_bench_record(c, unusable[c.device]);
    } else {
      double peak = 0;
      std::string peak_note, device_name;
      if (backend->device().is_cuda()) {
        device_name = gpu_name_from_describe(backend->describe());
        if (auto p = gpu_peak_tflops(suite.gpu_peaks, device_name, c.precision)) {
          peak = *p;
          peak_note = device_name + " dense " + c.precision + " datasheet peak " + fmt_sig(peak) + " TFLOP/s" +
                      (c.precision == "fp32" ? " (FMA pipes; Convoy's fp32 uses no TF32)" : "");
        } else {
          peak_note = "no peak known for '" + device_name + "' (add it under peaks.gpus in the suite)";
        }
      } else {
        device_name = cpu_peak.model_name;
        if (suite.cpu_peak_tflops > 0) {
          peak = suite.cpu_peak_tflops;
          peak_note = "CPU fp32 peak from the suite: " + fmt_sig(peak) + " TFLOP/s";
        } else {
          peak = cpu_peak.tflops;
          peak_note = "CPU fp32 peak estimate: " + cpu_peak.assumption;
        }
      }
      rec = run_bench_case(*backend, suite, c, timing, peak, peak_note, device_name);
    }
    if (rec.value("status", "") == "failed") ++failed;
    std::cerr << result_line(rec) << std::endl;
    records.push_back(std::move(rec));
  }

  // Peers, in the same run: one Python process for all their cases.
  std::vector<std::string> notes;
  std::vector<std::string> peer_engines;
  const std::string python = python_command();
  const fs::path bdir = bench_dir(args.suite);
  if (!suite.peers.empty()) {
    json peer_cases = json::array();
    for (const BenchCase& c : cases)
      if (!(c.device == "cpu" && c.precision == "bf16"))
        peer_cases.push_back({{"model_path", fs::absolute(c.model_path).string()}, {"model", c.model},
                              {"mode", c.mode}, {"batch", c.batch}, {"device", c.device}, {"precision", c.precision}});
    json t = {{"warmup_iterations", timing.warmup_iterations}, {"warmup_seconds", timing.warmup_seconds},
              {"round_seconds", timing.round_seconds}, {"min_rounds", timing.min_rounds},
              {"max_rounds", timing.max_rounds}, {"stable_spread", timing.stable_spread},
              {"max_seconds", timing.max_seconds}, {"latency_samples", timing.latency_samples},
              {"latency_seconds", timing.latency_seconds}};
    const json request = {{"peers", suite.peers}, {"cases", peer_cases}, {"timing", t},
                          {"threads", threads_used}, {"seed", suite.seed}, {"input_sets", suite.input_sets},
                          {"channels_last", suite.gpu_layout == "nhwc"},
                          {"optimizer", {{"lr", suite.optimizer.lr}, {"momentum", suite.optimizer.momentum},
                                         {"nesterov", suite.optimizer.nesterov},
                                         {"weight_decay", suite.optimizer.weight_decay}}},
                          {"label_smoothing", suite.label_smoothing},
                          {"augment", {{"crop_padding", suite.crop_padding}, {"horizontal_flip", suite.horizontal_flip}}},
                          {"normalize", {{"mean", suite.mean}, {"std", suite.std}}}};
    const fs::path request_path = out_dir / "peer_cases.json";
    std::ofstream(request_path) << request.dump(2) << "\n";
    if (bdir.empty()) {
      notes.push_back("peers missing: benchmarks/peers/pytorch_bench.py not found (set CONVOY_BENCH_DIR)");
    } else {
      std::cerr << "peers (" << python << " " << (bdir / "peers" / "pytorch_bench.py").string() << "):" << std::endl;
      int status = 0;
      const std::string out = run_capture(shell_quote(python) + " " +
                                              shell_quote((bdir / "peers" / "pytorch_bench.py").string()) +
                                              " --cases " + shell_quote(request_path.string()),
                                          status);
      int got = 0;
      std::istringstream lines(out);
      for (std::string line; std::getline(lines, line);) {
        if (line.empty() || line[0] != '{') continue;
        try {
          json r = json::parse(line);
          if (!r.contains("engine")) continue;
          records.push_back(std::move(r));
          ++got;
        } catch (const json::exception&) {
        }
      }
      if (status != 0 && got == 0)
        notes.push_back("peers missing: " + python + " pytorch_bench.py exited with status " + std::to_string(status) +
                        (status == 127 ? " (no such Python: set CONVOY_PYTHON)" : "") + " and reported nothing");
    }
    for (const std::string& e : suite.peers) {
      bool any = false;
      for (const json& r : records) any = any || r.value("engine", "") == e;
      if (any) peer_engines.push_back(e);
      // An engine reported only as missing gets one line, not a column of blanks.
      bool all_missing = any;
      std::string why;
      for (const json& r : records)
        if (r.value("engine", "") == e) {
          all_missing = all_missing && r.value("status", "") == "missing";
          why = r.value("reason", "");
        }
      if (any && all_missing) {
        peer_engines.pop_back();
        notes.push_back(std::string(peer_title(e)) + ": missing (" + why + ")");
      }
    }
  }

  // Convoy over each peer, where both measured the same case.
  json ratios = json::array();
  for (const json& r : records) {
    if (r.value("engine", "") != "convoy" || r.value("status", "") != "ok") continue;
    for (const json& p : records)
      if (p.value("engine", "") != "convoy" && p.value("status", "") == "ok" && key_of(p) == key_of(r))
        ratios.push_back({{"model", r["model"]}, {"mode", r["mode"]}, {"batch", r["batch"]},
                          {"device", r["device"]}, {"precision", r["precision"]}, {"peer", p["engine"]},
                          {"convoy_images_per_second", r["images_per_second"]},
                          {"peer_images_per_second", p["images_per_second"]},
                          {"ratio", num(r, "images_per_second") / num(p, "images_per_second")}});
  }

  // A busy machine skews CPU figures (and OpenMP spin-waiting makes it much worse): say so.
  if (env["loadavg"].is_string() && threads_used > 0) {
    const double load = std::atof(env["loadavg"].get<std::string>().c_str());
    const auto cores = static_cast<double>(std::thread::hardware_concurrency());
    if (load > 0.5 * cores)
      notes.push_back("warning: load average " + fmt(load, 2) + " at the start on " + fmt(cores, 0) +
                      " logical processors: other work competes with the CPU cases, whose figures are skewed");
  }
  notes.push_back("CPU peak: " + (suite.cpu_peak_tflops > 0 ? fmt_sig(suite.cpu_peak_tflops) + " TFLOP/s from the suite"
                                                            : cpu_peak.assumption));
  notes.push_back("FLOPs from the model graph (Model::forward_flops, 2 per multiply-add, pooling/activations/BN "
                  "included); a training step counts 3x the forward");
  json result = {{"schema", "convoy-bench-1"},
                 {"suite", args.suite},
                 {"suite_name", suite.name},
                 {"command", args.argv},
                 {"quick", args.quick},
                 {"python", python},
                 {"timing", {{"warmup_iterations", timing.warmup_iterations}, {"warmup_seconds", timing.warmup_seconds},
                             {"round_seconds", timing.round_seconds}, {"min_rounds", timing.min_rounds},
                             {"max_rounds", timing.max_rounds}, {"stable_spread", timing.stable_spread},
                             {"max_seconds", timing.max_seconds}, {"latency_samples", timing.latency_samples},
                             {"latency_seconds", timing.latency_seconds}}},
                 {"environment", env},
                 {"cpu_peak", {{"tflops", cpu_peak.tflops}, {"cores", cpu_peak.cores}, {"ghz", cpu_peak.ghz},
                               {"flops_per_cycle", cpu_peak.flops_per_cycle}, {"assumption", cpu_peak.assumption},
                               {"suite_override_tflops", suite.cpu_peak_tflops}}},
                 {"records", records},
                 {"ratios", ratios}};
  const fs::path json_path = out_dir / "results.json";
  std::ofstream(json_path) << result.dump(2) << "\n";

  // The chart (and a throughput chart that needs no GPU), by plot.py with matplotlib.
  if (args.no_chart) {
    notes.push_back("charts not drawn (--no-chart)");
  } else if (bdir.empty()) {
    notes.push_back("chart skipped: benchmarks/plot.py not found (set CONVOY_BENCH_DIR)");
  } else {
    // The peers' Python (CONVOY_PYTHON) may lack matplotlib where Debian's has it: try both.
    int status = 0;
    std::string out;
    for (const std::string& py : {python, std::string("/usr/bin/python3")}) {
      out = run_capture(shell_quote(py) + " " + shell_quote((bdir / "plot.py").string()) + " " +
                            shell_quote(json_path.string()) + " --out " + shell_quote(out_dir.string()),
                        status);
      if (status != 3 || py == "/usr/bin/python3" || !fs::exists("/usr/bin/python3")) break;
    }
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);)
      if (!line.empty()) notes.push_back((status == 0 ? "" : "chart skipped: ") + line);
    if (status != 0 && out.empty())
      notes.push_back("chart skipped: " + python + " plot.py exited with status " + std::to_string(status));
  }
  notes.push_back("results: " + json_path.string());

  const std::string md = markdown(suite, env, records, peer_engines, notes);
  std::ofstream(out_dir / "results.md") << md;
  std::cout << md << std::flush;
  if (failed) {
    std::cerr << "convoy bench: " << failed << " case(s) failed (see the table)" << std::endl;
    return 1;
  }
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, Action& chosen) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Benchmark training and inference, GPU against CPU and PyTorch");
  cmd->add_option("--suite,-s", args->suite, "suite YAML, e.g. benchmarks/suites/default.yaml")->required();
  cmd->add_option("--out,-o", args->out, "directory for results.json, results.md and the charts")
      ->default_str("bench-out");
  cmd->add_option("--devices", args->devices, "comma-separated devices to run (cuda, cuda:N, cpu); default: the suite's");
  cmd->add_option("--peers", args->peers,
                  "comma-separated peers (pytorch, pytorch_compiled, onnxruntime) or 'none'; default: the suite's");
  cmd->add_flag("--quick", args->quick, "short timing (a few rounds per case): a smoke test, not a measurement");
  cmd->add_flag("--no-chart", args->no_chart, "do not run plot.py");
  cmd->callback([args, &chosen] {
    args->argv = {"convoy", "bench"};
    for (const std::string& a : {std::string("--suite"), args->suite}) args->argv.push_back(a);
    args->argv.push_back("--out");
    args->argv.push_back(args->out);
    if (!args->devices.empty()) args->argv.insert(args->argv.end(), {"--devices", args->devices});
    if (!args->peers.empty()) args->argv.insert(args->argv.end(), {"--peers", args->peers});
    if (args->quick) args->argv.push_back("--quick");
    if (args->no_chart) args->argv.push_back("--no-chart");
    chosen = [args] { return run_bench(*args); };
  });
}

}  // namespace convoy::cli
