#include "apps/bench/bench_suite.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "engine/config/yaml_map.h"
#include "engine/core/error.h"

namespace convoy {

namespace {

namespace fs = std::filesystem;

std::vector<int64_t> read_batches(const YamlMap& map, std::string_view key) {
  const YAML::Node node = map.raw(key);
  if (!node.IsDefined() || node.IsNull()) return {};
  std::vector<int64_t> out;
  try {
    if (node.IsScalar()) {
      out.push_back(node.as<int64_t>());
    } else if (node.IsSequence()) {
      for (const auto& item : node) out.push_back(item.as<int64_t>());
    } else {
      map.fail(key, "expected a batch size or a list of batch sizes");
    }
  } catch (const YAML::Exception&) {
    map.fail(key, "expected a batch size or a list of batch sizes (positive integers)");
  }
  for (int64_t b : out)
    if (b <= 0) map.fail(key, "batch sizes must be positive, got " + std::to_string(b));
  return out;
}

void check_positive(const YamlMap& map, std::string_view key, double value) {
  if (!(value > 0)) map.fail(key, "must be greater than 0");
}

BenchTiming read_timing(const YamlMap& t, BenchTiming d) {
  d.warmup_iterations = t.get_int("warmup_iterations", d.warmup_iterations);
  d.warmup_seconds = t.get_double("warmup_seconds", d.warmup_seconds);
  d.round_seconds = t.get_double("round_seconds", d.round_seconds);
  d.min_rounds = t.get_int("min_rounds", d.min_rounds);
  d.max_rounds = t.get_int("max_rounds", d.max_rounds);
  d.stable_spread = t.get_double("stable_spread", d.stable_spread);
  d.max_seconds = t.get_double("max_seconds", d.max_seconds);
  d.latency_samples = t.get_int("latency_samples", d.latency_samples);
  d.latency_seconds = t.get_double("latency_seconds", d.latency_seconds);
  if (d.warmup_iterations < 1) t.fail("warmup_iterations", "must be at least 1");
  if (d.warmup_seconds < 0) t.fail("warmup_seconds", "must not be negative");
  check_positive(t, "round_seconds", d.round_seconds);
  if (d.min_rounds < 3) t.fail("min_rounds", "must be at least 3 (stability compares the last 3 rounds)");
  if (d.max_rounds < d.min_rounds) t.fail("max_rounds", "must be at least min_rounds");
  check_positive(t, "stable_spread", d.stable_spread);
  check_positive(t, "max_seconds", d.max_seconds);
  if (d.latency_samples < 1) t.fail("latency_samples", "must be at least 1");
  check_positive(t, "latency_seconds", d.latency_seconds);
  t.finish();
  return d;
}

}  // namespace

BenchTiming quick_bench_timing() {
  BenchTiming t;
  t.warmup_iterations = 2;
  t.warmup_seconds = 0.02;
  t.round_seconds = 0.02;
  t.min_rounds = 3;
  t.max_rounds = 5;
  t.stable_spread = 0.10;
  t.max_seconds = 3;
  t.latency_samples = 20;
  t.latency_seconds = 0.3;
  return t;
}

std::vector<GpuPeak> builtin_gpu_peaks() {
  // Dense (no sparsity) datasheet figures, TFLOP/s: fp32, bf16, tf32. Longer names first: first
  // match wins.
  return {
      {"H200 NVL", 60, 835, 418},
      {"H200", 67, 989, 495},
      {"H100 PCIe", 51, 756, 378},
      {"H100 NVL", 60, 835, 418},
      {"H100", 67, 989, 495},
      {"A100", 19.5, 312, 156},
      {"L40S", 91.6, 362, 183},
      {"L4", 30.3, 121, 60},
  };
}

std::optional<double> gpu_peak_tflops(const std::vector<GpuPeak>& table, const std::string& gpu_name,
                                      Precision precision) {
  for (const GpuPeak& p : table) {
    if (p.match.empty() || gpu_name.find(p.match) == std::string::npos) continue;
    // 8-bit tensor cores (int8, FP8) do twice the dense bf16 rate on Ampere, Ada and Hopper.
    const double v = precision == Precision::bf16   ? p.bf16
                     : precision == Precision::tf32 ? p.tf32
                     : is_eight_bit(precision)      ? 2 * p.bf16
                                                    : p.fp32;
    if (v > 0) return v;
    return std::nullopt;
  }
  return std::nullopt;
}

CpuPeak estimate_cpu_peak(const std::string& cpuinfo, int64_t threads) {
  CpuPeak r;
  std::set<std::pair<std::string, std::string>> cores;  // (physical id, core id)
  std::string physical, flags;
  int64_t processors = 0;
  double mhz = 0;
  std::istringstream in(cpuinfo);
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    std::string value = colon + 1 < line.size() ? line.substr(colon + 1) : "";
    value.erase(0, value.find_first_not_of(" \t"));
    if (key == "processor") ++processors;
    else if (key == "model name" && r.model_name.empty()) r.model_name = value;
    else if (key == "flags" && flags.empty()) flags = " " + value + " ";
    else if (key == "cpu MHz" && mhz == 0) mhz = std::atof(value.c_str());
    else if (key == "physical id") physical = value;
    else if (key == "core id") cores.insert({physical, value});
  }
  const int64_t physical_cores = cores.empty() ? processors : static_cast<int64_t>(cores.size());
  r.cores = threads > 0 ? std::min(threads, std::max<int64_t>(1, physical_cores)) : physical_cores;
  std::smatch m;
  std::string clock_source;
  if (std::regex_search(r.model_name, m, std::regex("@ *([0-9.]+) *GHz"))) {
    r.ghz = std::stod(m[1]);
    clock_source = "nominal clock from the model name";
  } else if (mhz > 0) {
    r.ghz = mhz / 1000.0;
    clock_source = "'cpu MHz' of /proc/cpuinfo, taken as the nominal clock";
  }
  auto has = [&](const char* flag) { return flags.find(std::string(" ") + flag + " ") != std::string::npos; };
  std::string isa;
  if (has("avx512f")) {
    r.flops_per_cycle = 64, isa = "avx512f: 2 FMA units x 16 fp32 lanes x 2";
  } else if (has("avx2") && has("fma")) {
    r.flops_per_cycle = 32, isa = "avx2+fma: 2 FMA units x 8 fp32 lanes x 2";
  } else if (has("avx")) {
    r.flops_per_cycle = 16, isa = "avx: 8-lane add + 8-lane multiply";
  } else {
    r.flops_per_cycle = 8, isa = "sse: 4-lane add + 4-lane multiply";
  }
  r.tflops = static_cast<double>(r.cores) * r.ghz * static_cast<double>(r.flops_per_cycle) / 1000.0;
  std::ostringstream a;
  a.precision(4);
  a << r.cores << " core(s) x " << r.ghz << " GHz (" << (clock_source.empty() ? "clock unknown" : clock_source)
    << ") x " << r.flops_per_cycle << " fp32 FLOP/cycle (" << isa << ") = " << r.tflops
    << " TFLOP/s; turbo, SMT and AVX-512 clock offsets ignored";
  r.assumption = a.str();
  return r;
}

BenchSuite parse_bench_suite(const std::string& yaml_text, const std::string& source,
                             const std::string& base_dir) {
  const YAML::Node root = yaml_load_string(yaml_text, source);
  if (!root.IsMap()) throw InputError(source + ": expected a mapping of keys to values at the top");
  BenchSuite s;
  s.source = source;
  const YamlMap top(root, source, "");
  s.name = top.get_string("name", s.name);

  const YAML::Node models = top.raw("models");
  if (!models.IsSequence() || models.size() == 0)
    top.fail("models", "expected a list of {model: path, inference: [batches], training: [batches]}");
  for (size_t i = 0; i < models.size(); ++i) {
    const YamlMap m(models[i], source, "models[" + std::to_string(i) + "]");
    BenchModel bm;
    std::string path = m.get_string("model");
    if (!path.empty() && !fs::path(path).is_absolute()) path = (fs::path(base_dir) / path).lexically_normal().string();
    if (!fs::exists(path)) m.fail("model", "file not found: " + path);
    bm.path = path;
    bm.inference_batches = read_batches(m, "inference");
    bm.training_batches = read_batches(m, "training");
    if (bm.inference_batches.empty() && bm.training_batches.empty())
      m.fail("give 'inference' or 'training' batch sizes (or both)");
    m.finish();
    s.models.push_back(std::move(bm));
  }

  s.devices = top.get_strings("devices", s.devices);
  for (const std::string& d : s.devices)
    if (d != "cpu" && d != "cuda" && d.rfind("cuda:", 0) != 0)
      top.fail("devices", "'" + d + "' is not one of: cpu, cuda, cuda:N");
  if (s.devices.empty()) top.fail("devices", "needs at least one device");
  const std::vector<std::string> precision_texts = top.get_strings("precisions", precision_names(s.precisions));
  s.precisions.clear();
  for (const std::string& p : precision_texts) {
    const std::optional<Precision> precision = precision_from_string(p);
    if (!precision)
      top.fail("precisions", "'" + p + "' is not one of: " + precision_list(kBenchPrecisions) +
                                 " (tf32: GPU only; int8: inference; fp8: GPU inference)");
    s.precisions.push_back(*precision);
  }
  if (s.precisions.empty()) top.fail("precisions", "needs at least one precision");
  s.gpu_layout = top.get_choice("gpu_layout", s.gpu_layout, {"auto", "nchw", "nhwc"});
  s.threads = top.get_int("threads", s.threads);
  if (s.threads < 0) top.fail("threads", "must be 0 (all cores) or positive");
  const int64_t seed = top.get_int("seed", 1);
  if (seed < 0) top.fail("seed", "must not be negative");
  s.seed = static_cast<uint64_t>(seed);
  s.input_sets = top.get_int("input_sets", s.input_sets);
  if (s.input_sets < 1) top.fail("input_sets", "must be at least 1");

  const YamlMap train = top.get_map("training");
  const YamlMap opt = train.get_map("optimizer");
  opt.get_choice("type", "sgd", {"sgd"});
  s.optimizer.type = "sgd";
  s.optimizer.lr = opt.get_double("lr", 0.01);
  check_positive(opt, "lr", s.optimizer.lr);
  s.optimizer.momentum = opt.get_double("momentum", 0.9);
  if (s.optimizer.momentum < 0 || s.optimizer.momentum >= 1) opt.fail("momentum", "must be in [0, 1)");
  s.optimizer.nesterov = opt.get_bool("nesterov", true);
  if (s.optimizer.nesterov && s.optimizer.momentum == 0) opt.fail("nesterov", "needs momentum > 0");
  s.optimizer.weight_decay = opt.get_double("weight_decay", 5e-4);
  if (s.optimizer.weight_decay < 0) opt.fail("weight_decay", "must not be negative");
  opt.finish();
  s.label_smoothing = train.get_double("label_smoothing", s.label_smoothing);
  if (s.label_smoothing < 0 || s.label_smoothing >= 1) train.fail("label_smoothing", "must be in [0, 1)");
  const YamlMap aug = train.get_map("augment");
  s.crop_padding = aug.get_int("crop_padding", s.crop_padding);
  if (s.crop_padding < 0) aug.fail("crop_padding", "must be 0 (off) or positive");
  s.horizontal_flip = aug.get_bool("horizontal_flip", s.horizontal_flip);
  aug.finish();
  train.finish();

  const YamlMap norm = top.get_map("normalize");
  s.mean = norm.get_doubles("mean", s.mean);
  s.std = norm.get_doubles("std", s.std);
  if (s.mean.size() != s.std.size() || s.mean.empty() || s.mean.size() > 4)
    norm.fail("std", "mean and std need one value (for every channel) or one per channel, 1 to 4");
  for (double v : s.std) check_positive(norm, "std", v);
  norm.finish();

  s.timing = read_timing(top.get_map("timing"), s.timing);

  s.gpu_peaks = builtin_gpu_peaks();
  const YamlMap peaks = top.get_map("peaks");
  const YAML::Node gpus = peaks.raw("gpus");
  if (gpus.IsDefined() && !gpus.IsNull()) {
    if (!gpus.IsSequence()) peaks.fail("gpus", "expected a list of {match: NAME, fp32: TFLOPS, bf16: TFLOPS, tf32: TFLOPS (default bf16 / 2)}");
    std::vector<GpuPeak> table;
    for (size_t i = 0; i < gpus.size(); ++i) {
      const YamlMap g(gpus[i], source, "peaks.gpus[" + std::to_string(i) + "]");
      GpuPeak p;
      p.match = g.get_string("match");
      p.fp32 = g.get_double(to_string(Precision::fp32), 0);
      p.bf16 = g.get_double(to_string(Precision::bf16), 0);
      p.tf32 = g.get_double(to_string(Precision::tf32), p.bf16 / 2);
      if (p.fp32 < 0 || p.bf16 < 0 || p.tf32 < 0) g.fail("peaks must not be negative");
      g.finish();
      table.push_back(p);
    }
    // The suite's entries first, then the built-in ones for GPUs it does not name.
    table.insert(table.end(), s.gpu_peaks.begin(), s.gpu_peaks.end());
    s.gpu_peaks = std::move(table);
  }
  if (peaks.has("cpu")) {
    const YAML::Node cpu = peaks.raw("cpu");
    if (!(cpu.IsScalar() && cpu.Scalar() == "auto")) s.cpu_peak_tflops = peaks.get_double("cpu");
    if (s.cpu_peak_tflops < 0) peaks.fail("cpu", "expected 'auto' or a positive fp32 TFLOP/s figure");
  } else {
    peaks.raw("cpu");
  }
  peaks.finish();

  s.peers = top.get_strings("peers", s.peers);
  for (const std::string& p : s.peers)
    if (p != "pytorch" && p != "pytorch_compiled" && p != "onnxruntime")
      top.fail("peers", "'" + p + "' is not one of: pytorch, pytorch_compiled, onnxruntime");
  s.peer_compile_modes = top.get_strings("peer_compile_modes", s.peer_compile_modes);
  if (s.peer_compile_modes.empty()) top.fail("peer_compile_modes", "needs at least one torch.compile mode");
  std::string known;
  for (const char* m : kPeerCompileModes) known += std::string(known.empty() ? "" : ", ") + m;
  for (const std::string& m : s.peer_compile_modes) {
    if (std::find(std::begin(kPeerCompileModes), std::end(kPeerCompileModes), m) == std::end(kPeerCompileModes))
      top.fail("peer_compile_modes", "'" + m + "' is not one of: " + known);
    if (std::count(s.peer_compile_modes.begin(), s.peer_compile_modes.end(), m) > 1)
      top.fail("peer_compile_modes", "'" + m + "' is listed twice");
  }
  top.finish();
  return s;
}

BenchSuite load_bench_suite(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open the suite file (does it exist?)");
  std::stringstream text;
  text << in.rdbuf();
  const std::string base = fs::path(path).parent_path().string();
  return parse_bench_suite(text.str(), path, base.empty() ? "." : base);
}

}  // namespace convoy
