#include "apps/bench/bench_report.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>
#include <utility>

#include "engine/core/precision.h"

namespace convoy {

using nlohmann::json;

std::string bench_format_fixed(double v, int digits) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(digits) << v;
  return o.str();
}

std::string bench_format_sig(double v) {
  if (!std::isfinite(v)) return "n/a";
  const double a = std::fabs(v);
  if (a >= 100) return bench_format_fixed(v, 0);
  if (a >= 10) return bench_format_fixed(v, 1);
  if (a >= 1) return bench_format_fixed(v, 2);
  if (a >= 0.01) return bench_format_fixed(v, 3);
  std::ostringstream o;
  o << std::setprecision(2) << v;
  return o.str();
}

double bench_number(const json& record, const char* key) {
  auto it = record.find(key);
  return it != record.end() && it->is_number() ? it->get<double>() : NAN;
}

std::string bench_case_key(const json& r) {
  return r.value("model", "") + "|" + r.value("mode", "") + "|" + std::to_string(r.value("batch", 0)) + "|" +
         r.value("device", "") + "|" + r.value("precision", "");
}

std::string bench_case_label(const json& r) {
  return r.value("model", "") + " " + r.value("mode", "") + " b" + std::to_string(r.value("batch", 0)) + " " +
         r.value("device", "") + " " + r.value("precision", "");
}

const char* bench_peer_title(const std::string& engine) {
  if (engine == "pytorch") return "PyTorch";
  if (engine == "pytorch_compiled") return "PyTorch compiled";
  if (engine == "onnxruntime") return "ONNX Runtime";
  return "peer";
}

std::string slow_samples_text(const json& slow) {
  std::string s = std::to_string(slow.value("count", 0)) + " latency sample(s) over " +
                  bench_format_sig(slow.value("over_median_times", 0.0)) + "x the median, " +
                  bench_format_sig(slow.value("wall_ms", 0.0)) + " ms in all";
  if (!slow.contains("split")) return s + " (the thread's times are not known here)";
  const json& split = slow["split"];
  s += split.value("samples", 0) == slow.value("count", 0) ? "" : "; of " + std::to_string(split.value("samples", 0)) + " of them";
  return s + ": " + bench_format_sig(split.value("on_cpu_ms", 0.0)) + " ms on a CPU, " +
         bench_format_sig(split.value("waiting_for_cpu_ms", 0.0)) + " ms waiting for one, " +
         bench_format_sig(split.value("blocked_ms", 0.0)) + " ms blocked; " +
         std::to_string(split.value("preemptions", 0)) + " preemption(s), " +
         std::to_string(split.value("minor_faults", 0)) + " minor and " +
         std::to_string(split.value("major_faults", 0)) + " major page fault(s)";
}

std::string bench_case_line(const json& rec) {
  const std::string status = rec.value("status", "");
  if (status != "ok") return status + ": " + rec.value("reason", "");
  std::string s = bench_format_sig(bench_number(rec, "images_per_second")) + " img/s, p50 " +
                  bench_format_sig(bench_number(rec, "p50_ms")) + " ms, p99 " +
                  bench_format_sig(bench_number(rec, "p99_ms")) + " ms, " +
                  bench_format_sig(bench_number(rec, "tflops")) + " TFLOP/s";
  if (rec.contains("fraction_of_peak") && rec["fraction_of_peak"].is_number())
    s += " (" + bench_format_fixed(100 * bench_number(rec, "fraction_of_peak"), 1) + "% of peak)";
  const bool stable = rec.value("stable", false);
  s += ", " + std::to_string(rec.value("rounds", 0)) + " rounds x " +
       std::to_string(rec.value("iterations_per_round", 0)) + (stable ? ", stable" : "") +
       (stable ? "" : ", NOT stable (spread " + bench_format_fixed(100 * bench_number(rec, "spread"), 1) + "%)");
  if (rec.contains("slow_samples")) s += "\n      " + slow_samples_text(rec["slow_samples"]);
  return s;
}

namespace {

// The text of env[key] when it is a string, else `otherwise` (also when there is no such key:
// a const json's operator[] must not be asked for one).
std::string env_text(const json& env, const char* key, const std::string& otherwise) {
  const auto it = env.find(key);
  return it != env.end() && it->is_string() ? it->get<std::string>() : otherwise;
}

void write_environment(std::ostream& md, const BenchSuite& suite, const json& env) {
  md << "## convoy bench: suite " << suite.name << " (" << suite.source << ")\n\n";
  md << "- date: " << env.value("date", "") << "; convoy " << env.value("convoy_version", "") << ", commit "
     << env_text(env, "git_commit", "unknown").substr(0, 12)
     << (env.value("git_dirty", false) ? " (uncommitted changes)" : "") << "\n";
  md << "- CPU: " << env_text(env, "cpu_model", "unknown") << ", " << env.value("threads", 0) << " threads; oneDNN "
     << env_text(env, "onednn", "unknown") << "; load average at start " << env_text(env, "loadavg", "unknown");
  if (env.contains("threading_env"))
    for (const auto& [name, value] : env["threading_env"].items()) md << "; " << name << "=" << value.get<std::string>();
  md << "\n";
  if (env.contains("gpu") && env["gpu"].is_string())
    md << "- GPU: " << env["gpu"].get<std::string>() << "; driver " << env_text(env, "nvidia_driver", "?") << " ("
       << env_text(env, "cuda_driver", "?") << "); CUDA runtime " << env_text(env, "cuda_runtime", "?") << "; cuDNN "
       << env_text(env, "cudnn", "?") << "\n";
  else
    md << "- GPU: none usable (" << env_text(env, "gpu_unavailable_reason", "?") << ")\n";
  md << "\n";
}

// Reasons for failed or skipped cells, numbered in order of first use.
class Footnotes {
 public:
  const std::string& tag(const std::string& reason) {
    auto it = tags_.find(reason);
    if (it == tags_.end()) {
      // Built by append: "[" + std::to_string(n) trips a false -Wrestrict in GCC 12.
      std::string tag = std::string("[").append(std::to_string(tags_.size() + 1)).append("]");
      it = tags_.emplace(reason, std::move(tag)).first;
    }
    return it->second;
  }
  void write(std::ostream& md) const {
    if (tags_.empty()) return;
    std::vector<std::pair<std::string, std::string>> ordered;
    for (const auto& [reason, tag] : tags_) ordered.emplace_back(tag, reason);
    std::sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) {
      return std::stoi(a.first.substr(1)) < std::stoi(b.first.substr(1));
    });
    md << "\n";
    for (const auto& [tag, reason] : ordered) md << tag << " " << reason << "\n";
  }

 private:
  std::map<std::string, std::string> tags_;  // reason -> "[n]"
};

// torch.compile's row is the fastest of several setups (compile modes, optimizer or precision
// variants): a footnote says which one won, so the figure can be reproduced.
std::string compiled_variant_tag(const json& p, Footnotes& footnotes) {
  const std::string mode = p.value("compile_mode", "");
  if (mode.empty()) return "";
  std::string what = "PyTorch compiled: the fastest of its variants, torch.compile mode " + mode;
  if (p.contains("optimizer_variant")) what += ", optimizer " + p.value("optimizer_variant", "");
  if (p.contains("precision_variant")) what += ", precision " + p.value("precision_variant", "");
  return " " + footnotes.tag(what + " (every variant's img/s: results.json, `variants`)");
}

// A peer's two cells for Convoy's record `r`: its img/s and Convoy over it.
void write_peer_cells(std::ostream& md, const json& r, const json* peer, const std::string& engine,
                      Footnotes& footnotes) {
  if (!peer) {
    md << " | |";
    return;
  }
  const json& p = *peer;
  if (p.value("status", "") != "ok") {
    md << " " << p.value("status", "") << " "
       << footnotes.tag(std::string(bench_peer_title(engine)) + " on " + p.value("device", "") + ": " +
                        p.value("reason", ""))
       << " | |";
    return;
  }
  const bool ok = r.value("status", "") == "ok";
  md << " " << bench_format_sig(bench_number(p, "images_per_second")) << compiled_variant_tag(p, footnotes) << " | "
     << (ok ? bench_format_fixed(bench_number(r, "images_per_second") / bench_number(p, "images_per_second"), 2) + "x"
            : std::string(""))
     << " |";
}

void write_convoy_cells(std::ostream& md, const json& r, Footnotes& footnotes) {
  md << "| " << r.value("model", "") << " | " << r.value("mode", "") << " | " << r.value("batch", 0) << " | "
     << r.value("device", "") << " | " << r.value("precision", "") << " | ";
  const std::string status = r.value("status", "");
  if (status != "ok") {
    md << status << " " << footnotes.tag(r.value("device", "") + ": " + r.value("reason", "")) << " | | | | |";
    return;
  }
  const double peak = bench_number(r, "fraction_of_peak");  // NaN without a peak to compare with
  md << bench_format_sig(bench_number(r, "images_per_second")) << (r.value("stable", false) ? "" : " (unstable)")
     << " | " << bench_format_sig(bench_number(r, "p50_ms")) << " | " << bench_format_sig(bench_number(r, "p99_ms"))
     << " | " << bench_format_sig(bench_number(r, "tflops")) << " | "
     << (std::isnan(peak) ? std::string("n/a") : bench_format_fixed(100 * peak, 1) + "%") << " |";
}

// Convoy over the faster of PyTorch eager and torch.compile where both ran, the figure a user
// who picks PyTorch's best setting would compare with: "1.17x (compiled)"; empty where neither
// measured the case or Convoy did not.
std::string best_pytorch_cell(const json& r, const std::map<std::string, const json*>& peers) {
  const json* best = nullptr;
  for (const char* engine : {"pytorch", "pytorch_compiled"}) {
    auto it = peers.find(std::string(engine) + "#" + bench_case_key(r));
    if (it == peers.end() || it->second->value("status", "") != "ok") continue;
    if (!best || bench_number(*it->second, "images_per_second") > bench_number(*best, "images_per_second"))
      best = it->second;
  }
  if (!best || r.value("status", "") != "ok") return "";
  return bench_format_fixed(bench_number(r, "images_per_second") / bench_number(*best, "images_per_second"), 2) +
         "x (" + (best->value("engine", "") == "pytorch" ? "eager" : "compiled") + ")";
}

// One row per Convoy case, with each peer's figure and the ratio beside it, and against the
// best PyTorch where the suite runs it both ways.
void write_main_table(std::ostream& md, const json& records, const std::vector<std::string>& peer_engines,
                      Footnotes& footnotes) {
  std::map<std::string, const json*> peers;  // engine#key -> record
  for (const json& r : records)
    if (r.value("engine", "") != "convoy") peers[r.value("engine", "") + "#" + bench_case_key(r)] = &r;
  const auto runs = [&](const char* e) {
    return std::find(peer_engines.begin(), peer_engines.end(), e) != peer_engines.end();
  };
  const bool best_column = runs("pytorch") && runs("pytorch_compiled");

  md << "| model | mode | batch | device | precision | img/s | p50 ms | p99 ms | TFLOP/s | % of peak |";
  for (const std::string& e : peer_engines)
    md << " " << bench_peer_title(e) << " img/s | Convoy / " << bench_peer_title(e) << " |";
  if (best_column) md << " Convoy / best PyTorch |";
  md << "\n|---|---|---:|---|---|---:|---:|---:|---:|---:|";
  for (size_t i = 0; i < peer_engines.size(); ++i) md << "---:|---:|";
  if (best_column) md << "---:|";
  md << "\n";
  for (const json& r : records) {
    if (r.value("engine", "") != "convoy") continue;
    write_convoy_cells(md, r, footnotes);
    for (const std::string& e : peer_engines) {
      auto it = peers.find(e + "#" + bench_case_key(r));
      write_peer_cells(md, r, it == peers.end() ? nullptr : it->second, e, footnotes);
    }
    if (best_column) md << " " << best_pytorch_cell(r, peers) << " |";
    md << "\n";
  }
}

bool convoy_ok(const json& r) { return r.value("engine", "") == "convoy" && r.value("status", "") == "ok"; }

// GPU over CPU: the same model, mode and batch; CPU fp32 as the base.
void write_gpu_over_cpu(std::ostream& md, const json& records) {
  std::ostringstream speed;
  for (const json& g : records) {
    if (!convoy_ok(g) || g.value("device", "").rfind("cuda", 0) != 0) continue;
    for (const json& c : records)
      if (convoy_ok(c) && c.value("device", "") == "cpu" && precision_from_string(c.value("precision", "")) == Precision::fp32 &&
          c.value("model", "") == g.value("model", "") && c.value("mode", "") == g.value("mode", "") &&
          c.value("batch", 0) == g.value("batch", 0))
        speed << "| " << g.value("model", "") << " | " << g.value("mode", "") << " | " << g.value("batch", 0) << " | "
              << g.value("precision", "") << " | "
              << bench_format_fixed(bench_number(g, "images_per_second") / bench_number(c, "images_per_second"), 1)
              << "x |\n";
  }
  if (!speed.str().empty())
    md << "\nGPU over CPU (Convoy, GPU images/s over CPU fp32 images/s):\n\n"
       << "| model | mode | batch | GPU precision | speedup |\n|---|---|---:|---|---:|\n"
       << speed.str();
}

}  // namespace

std::string bench_markdown(const BenchSuite& suite, const json& env, const json& records,
                           const std::vector<std::string>& peer_engines, const std::vector<std::string>& notes) {
  std::ostringstream md;
  write_environment(md, suite, env);
  Footnotes footnotes;
  write_main_table(md, records, peer_engines, footnotes);
  write_gpu_over_cpu(md, records);
  footnotes.write(md);
  if (!notes.empty()) {
    md << "\n";
    for (const std::string& n : notes) md << "- " << n << "\n";
  }
  return md.str();
}

}  // namespace convoy
