// The benchmark harness end to end: `convoy bench` on the quick suite (once and repeated), its
// profile, peers and precisions. Its parts (suites, peaks, FLOPs, timing): test_bench_suite.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "run_command.h"
#include "engine/backends/backend.h"
#include "engine/core/error.h"
#include "engine/graph/model.h"
#include "apps/bench/bench_profile.h"
#include "apps/bench/bench_repeat.h"
#include "apps/bench/bench_report.h"
#include "apps/bench/bench_runner.h"
#include "apps/bench/bench_suite.h"

namespace convoy {
namespace {

namespace fs = std::filesystem;
const std::string kSource = CONVOY_SOURCE_DIR;

struct Result {
  int status = -1;
  std::string out;  // stdout only
  std::string err;
};

Result run_binary(const std::string& args, const fs::path& err_file) {
  const auto ran = convoy::testing::run_command(std::string(CONVOY_BINARY) + " " + args + " 2>" + err_file.string());
  Result r;
  r.status = ran.status;
  r.out = ran.output;
  std::ifstream in(err_file);
  std::stringstream s;
  s << in.rdbuf();
  r.err = s.str();
  return r;
}

TEST(Bench, QuickSuiteWritesTableJsonAndReportsTheGpuCase) {
  const fs::path dir = fs::temp_directory_path() / ("convoy_bench_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // cuda is added on purpose: without a usable GPU it must come back as skipped, with the reason.
  const Result r = run_binary("bench --suite " + kSource + "/benchmarks/suites/quick.yaml --out " +
                                  (dir / "out").string() + " --devices cpu,cuda",
                              dir / "stderr.txt");
  ASSERT_EQ(r.status, 0) << r.out << r.err;

  // The markdown table on stdout, one line per case on stderr.
  EXPECT_NE(r.out.find("| model | mode | batch | device | precision | img/s | p50 ms | p99 ms | TFLOP/s | % of peak |"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| lenet5 | training | 8 | cpu | fp32 | "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| lenet5 | inference | 8 | cpu | fp32 | "), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("[1/4] lenet5 training b8 cpu fp32: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[4/4] lenet5 inference b8 cuda fp32: "), std::string::npos) << r.err;

  std::ifstream in(dir / "out" / "results.json");
  ASSERT_TRUE(in) << "no results.json";
  const nlohmann::json doc = nlohmann::json::parse(in);
  const nlohmann::json& env = doc.at("environment");
  EXPECT_FALSE(env.at("date").get<std::string>().empty());
  EXPECT_GT(env.at("threads").get<int>(), 0);
  EXPECT_TRUE(env.at("onednn").is_string()) << env.dump(2);
  EXPECT_TRUE(env.contains("cpu_model"));
  EXPECT_TRUE(env.contains("git_commit"));
  EXPECT_TRUE(env.contains("gpu"));
  EXPECT_TRUE(env.contains("cudnn"));

  const int64_t flops = Model::from_file(kSource + "/models/lenet5.yaml", 1).forward_flops();
  const std::string gpu_reason = cuda_unavailable_reason();
  int ok = 0, skipped = 0;
  for (const nlohmann::json& rec : doc.at("records")) {
    if (rec.at("engine") != "convoy") continue;
    EXPECT_EQ(rec.at("model"), "lenet5");
    EXPECT_EQ(rec.at("batch"), 8);
    const std::string mode = rec.at("mode");
    if (rec.at("device") == "cpu") {
      ASSERT_EQ(rec.at("status"), "ok") << rec.dump(2);
      ++ok;
      EXPECT_GT(rec.at("images_per_second").get<double>(), 0);
      EXPECT_GT(rec.at("p50_ms").get<double>(), 0);
      EXPECT_GE(rec.at("p99_ms").get<double>(), rec.at("p50_ms").get<double>());
      EXPECT_GT(rec.at("tflops").get<double>(), 0);
      EXPECT_GT(rec.at("peak_tflops").get<double>(), 0);
      EXPECT_GT(rec.at("fraction_of_peak").get<double>(), 0);
      EXPECT_GE(rec.at("rounds").get<int>(), 3);
      EXPECT_EQ(rec.at("forward_flops_per_image").get<int64_t>(), flops);
      EXPECT_DOUBLE_EQ(rec.at("flops_per_iteration").get<double>(),
                       static_cast<double>(flops) * 8 * (mode == "training" ? 3 : 1));
      // The CPU records nothing: its training steps run layer by layer (lenet5's dropout would
      // keep them there anyway).
      if (mode == "training") {
        EXPECT_EQ(rec.value("path", ""), "layer by layer") << rec.dump(2);
      }
      // TFLOP/s is the FLOPs over the median iteration time.
      EXPECT_NEAR(rec.at("tflops").get<double>(),
                  rec.at("flops_per_iteration").get<double>() / (rec.at("ms_per_iteration").get<double>() * 1e-3) / 1e12,
                  1e-9);
    } else if (!gpu_reason.empty()) {
      EXPECT_EQ(rec.at("status"), "skipped") << rec.dump(2);
      EXPECT_EQ(rec.at("reason"), gpu_reason);
      ++skipped;
    }
  }
  EXPECT_EQ(ok, 2);
  if (!gpu_reason.empty()) {
    EXPECT_EQ(skipped, 2);
    EXPECT_NE(r.out.find("| lenet5 | training | 8 | cuda | fp32 | skipped"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(gpu_reason), std::string::npos) << r.out;
  }
  fs::remove_all(dir);
}

// --profile: every layer of the model timed, forward in both modes and backward in training,
// the slowest printed; the layer times fit in the synchronized step. The CPU has no kernel table:
// the profile says why instead.
TEST(Bench, ProfileTimesEveryLayer) {
  const fs::path dir = fs::temp_directory_path() / ("convoy_bench_profile_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const Result r = run_binary("bench --suite " + kSource + "/benchmarks/suites/quick.yaml --out " +
                                  (dir / "out").string() + " --devices cpu --peers none --no-chart --profile",
                              dir / "stderr.txt");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("per-layer times (5 synchronized steps, median)"), std::string::npos) << r.err;
  const std::vector<LayerInfo> infos = Model::from_file(kSource + "/models/lenet5.yaml", 1).layer_infos();
  std::ifstream in(dir / "out" / "results.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  int profiled = 0;
  for (const nlohmann::json& rec : doc.at("records")) {
    if (rec.at("engine") != "convoy" || rec.at("status") != "ok") continue;
    ++profiled;
    const bool training = rec.at("mode") == "training";
    const nlohmann::json& p = rec.at("profile");
    ASSERT_EQ(p.at("layers").size(), infos.size()) << p.dump(2);
    double sum = 0;
    for (size_t i = 0; i < infos.size(); ++i) {
      const nlohmann::json& l = p.at("layers")[i];
      EXPECT_EQ(l.at("name"), infos[i].name);
      EXPECT_EQ(l.at("type"), infos[i].type);
      EXPECT_GT(l.at("forward_ms").get<double>(), 0) << l.dump();
      if (training) EXPECT_GT(l.at("backward_ms").get<double>(), 0) << l.dump();
      else EXPECT_TRUE(l.at("backward_ms").is_null()) << l.dump();
      sum += l.at("forward_ms").get<double>() + (training ? l.at("backward_ms").get<double>() : 0);
    }
    // Medians per layer need not add up to the median step exactly; they cannot exceed it by much.
    EXPECT_LT(sum, 1.5 * p.at("step_ms").get<double>()) << p.dump(2);
    EXPECT_NE(r.err.find(infos[0].name), std::string::npos) << r.err;
    // No kernel table on the CPU, and the reason instead of one.
    EXPECT_FALSE(p.contains("kernels")) << p.dump(2);
    ASSERT_TRUE(p.contains("kernels_note") && p.at("kernels_note").is_string()) << p.dump(2);
    EXPECT_FALSE(p.at("kernels_note").get<std::string>().empty());
    EXPECT_NE(r.err.find("kernels: not traced: " + p.at("kernels_note").get<std::string>()), std::string::npos)
        << r.err;
  }
  EXPECT_EQ(profiled, 2);
  EXPECT_NE(r.err.find("benchmarks/gpu/profile.sh"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

// A CPU backend whose kernel trace reports fixed kernels: the profile's kernel table without a GPU.
class FakeTracedCpu final : public Backend {
 public:
  struct Trace final : KernelTrace {
    std::vector<KernelTime> stop(std::string&) override {
      return {{"slow_kernel<float>", 10, 8.0}, {"fast_kernel", 5, 2.0}};  // over the 5 traced steps
    }
  };
  Device device() const override { return cpu_->device(); }
  const std::shared_ptr<Allocator>& allocator() const override { return cpu_->allocator(); }
  Ops& ops() override { return cpu_->ops(); }
  void synchronize() override { cpu_->synchronize(); }
  std::string describe() const override { return cpu_->describe(); }
  uint64_t free_memory() const override { return cpu_->free_memory(); }
  void inject_device_error() override { cpu_->inject_device_error(); }
  std::unique_ptr<KernelTrace> trace_kernels(std::string&) override {
    ++traces;
    return std::make_unique<Trace>();
  }
  int traces = 0;

 private:
  std::unique_ptr<Backend> cpu_ = make_cpu_backend({});
};

// Where the backend traces kernels, the profile runs the steps once more unobserved and lists the
// kernels per step, slowest first; the table prints the `top` of them against the traced step.
TEST(Bench, ProfileListsTheTracedKernelsPerStep) {
  FakeTracedCpu be;
  Model m = Model::from_file(kSource + "/models/lenet5.yaml", 1);
  m.to(be, DType::f32);
  const Tensor x = be.zeros({2, 1, 28, 28}, DType::f32);  // (N, C, H, W)
  int ran = 0;
  const nlohmann::json p = profile_layers(be, m, [&] {
    m.forward(be, x, StepInfo{});
    ++ran;
  }, 5);
  EXPECT_EQ(ran, 10);  // 5 observed, 5 traced
  EXPECT_EQ(be.traces, 1);
  EXPECT_FALSE(p.contains("kernels_note")) << p.dump(2);
  ASSERT_TRUE(p.contains("kernels")) << p.dump(2);
  ASSERT_EQ(p.at("kernels").size(), 2u) << p.dump(2);
  const nlohmann::json& slow = p.at("kernels")[0];
  EXPECT_EQ(slow.at("name"), "slow_kernel<float>");
  EXPECT_DOUBLE_EQ(slow.at("calls_per_step").get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(slow.at("ms_per_step").get<double>(), 1.6);
  EXPECT_DOUBLE_EQ(slow.at("share").get<double>(), 0.8);
  EXPECT_DOUBLE_EQ(p.at("kernels_ms_per_step").get<double>(), 2.0);
  EXPECT_EQ(p.at("kernels_distinct"), 2);
  EXPECT_GT(p.at("kernels_step_ms").get<double>(), 0);
  EXPECT_EQ(p.at("layers").size(), m.layer_infos().size());  // the per-layer part as before
  const std::string table = profile_table(p, 1);
  EXPECT_NE(table.find("2.000 ms/step in 2 kernels"), std::string::npos) << table;
  EXPECT_NE(table.find("1.600"), std::string::npos) << table;
  EXPECT_NE(table.find("80.0%  slow_kernel<float>"), std::string::npos) << table;
  EXPECT_EQ(table.find("fast_kernel"), std::string::npos) << table;  // beyond the top 1
  EXPECT_EQ(table.find("profile.sh"), std::string::npos) << table;
}

// With PyTorch run both ways, each row also rates Convoy against the faster of the two: a user
// would take PyTorch's best setting. Records as `convoy bench` writes them, one case each way round.
TEST(Bench, TheTableRatesConvoyAgainstTheBestPyTorch) {
  const auto record = [](const char* engine, int64_t batch, const char* status, double ips) {
    return nlohmann::json{{"engine", engine}, {"model", "resnet50"}, {"mode", "training"}, {"batch", batch},
                          {"device", "cuda"}, {"precision", "bf16"}, {"status", status},
                          {"images_per_second", ips}, {"p50_ms", 1.0}, {"p99_ms", 1.0}, {"tflops", 1.0},
                          {"fraction_of_peak", 0.1}, {"stable", true}, {"reason", "ran out of memory"}};
  };
  nlohmann::json compiled_256 = record("pytorch_compiled", 256, "ok", 6499);
  compiled_256["compile_mode"] = "reduce-overhead";  // the fastest of the compiled peer's variants
  compiled_256["optimizer_variant"] = "fused";
  const nlohmann::json records = nlohmann::json::array({
      record("convoy", 256, "ok", 7595), record("pytorch", 256, "ok", 4513),
      compiled_256,
      record("convoy", 64, "ok", 3000), record("pytorch", 64, "ok", 2000),
      record("pytorch_compiled", 64, "failed", 0),
  });
  BenchSuite suite;
  const nlohmann::json env = nlohmann::json::object();  // no environment recorded: every line says "unknown"
  const std::string md = bench_markdown(suite, env, records, {"pytorch", "pytorch_compiled"}, {});
  EXPECT_NE(md.find("| Convoy / best PyTorch |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1.17x (compiled) |"), std::string::npos) << md;  // 7595 / 6499, compiled the faster
  EXPECT_NE(md.find("| 1.50x (eager) |"), std::string::npos) << md;     // compiled failed: eager is the best
  // The compiled figure names the setup that won, in a footnote.
  EXPECT_NE(md.find("| 6499 [1] | 1.17x |"), std::string::npos) << md;
  EXPECT_NE(md.find("[1] PyTorch compiled: the fastest of its variants, torch.compile mode reduce-overhead, "
                    "optimizer fused"), std::string::npos) << md;
  // One peer only: no such column.
  EXPECT_EQ(bench_markdown(suite, env, records, {"pytorch"}, {}).find("best PyTorch"), std::string::npos);
}

// --repeat N: the comparison N times in a row, one row per case with each engine's median run
// (by images/s) and every run's figure in results.json; N is checked.
TEST(Bench, RepeatKeepsEachCasesMedianRun) {
  const fs::path dir = fs::temp_directory_path() / ("convoy_bench_repeat_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const Result r = run_binary("bench --suite " + kSource + "/benchmarks/suites/quick.yaml --out " +
                                  (dir / "out").string() + " --devices cpu --peers none --no-chart --repeat 3",
                              dir / "stderr.txt");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("(run 3/3)"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("the median of 3 runs"), std::string::npos) << r.out;
  std::ifstream in(dir / "out" / "results.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  ASSERT_EQ(doc.at("records").size(), 2u) << doc.at("records").dump(2);  // one per case: training, inference
  for (const nlohmann::json& rec : doc.at("records")) {
    ASSERT_EQ(rec.at("status"), "ok") << rec.dump(2);
    std::vector<double> runs = rec.at("runs_images_per_second").get<std::vector<double>>();
    ASSERT_EQ(runs.size(), 3u);
    std::sort(runs.begin(), runs.end());
    EXPECT_GT(runs[0], 0);
    EXPECT_EQ(rec.at("images_per_second").get<double>(), runs[1]) << rec.dump(2);
  }
  const Result bad = run_binary("bench --suite " + kSource + "/benchmarks/suites/quick.yaml --out " +
                                    (dir / "bad").string() + " --repeat 0",
                                dir / "stderr-bad.txt");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE((bad.out + bad.err).find("--repeat"), std::string::npos) << bad.out << bad.err;
  fs::remove_all(dir);
}

// The reduction behind --repeat on records as the runs write them: the median run (the faster
// middle one of an even count), every run's figure, a failure kept, far-apart runs named.
TEST(Bench, MedianRunsKeepsTheMiddleRunAndAnyFailure) {
  const auto record = [](const char* engine, int64_t batch, const char* status, double ips) {
    return nlohmann::json{{"engine", engine}, {"model", "fmnet"}, {"mode", "inference"}, {"batch", batch},
                          {"device", "cpu"}, {"precision", "fp32"}, {"status", status}, {"images_per_second", ips}};
  };
  const nlohmann::json runs = nlohmann::json::array({
      record("convoy", 1, "ok", 100), record("onnxruntime", 1, "ok", 90), record("convoy", 32, "ok", 50),
      record("convoy", 1, "ok", 130), record("onnxruntime", 1, "ok", 91), record("convoy", 32, "failed", 0),
      record("convoy", 1, "ok", 110), record("onnxruntime", 1, "ok", 92), record("convoy", 32, "ok", 52),
      record("convoy", 1, "ok", 120), record("onnxruntime", 1, "ok", 93), record("convoy", 32, "ok", 51),
  });
  std::vector<std::string> far_apart;
  const nlohmann::json kept = median_runs(runs, far_apart);
  ASSERT_EQ(kept.size(), 3u) << kept.dump(2);
  EXPECT_EQ(kept[0].at("engine"), "convoy");
  EXPECT_EQ(kept[0].at("images_per_second").get<double>(), 120);  // 100 110 [120] 130
  EXPECT_EQ(kept[0].at("runs_images_per_second"), nlohmann::json::array({100, 130, 110, 120}));
  EXPECT_EQ(kept[1].at("engine"), "onnxruntime");
  EXPECT_EQ(kept[1].at("images_per_second").get<double>(), 92);
  EXPECT_EQ(kept[2].at("status"), "failed");  // one failed run of four: the case failed
  EXPECT_EQ(far_apart, std::vector<std::string>{"convoy fmnet inference b1 cpu fp32 100-130"});
}

// ONNX Runtime 1.30 as the CPU-inference peer, in the same run: through npm's onnxruntime-node
// (scripts/install-onnxruntime-node.sh) where Debian's Python has no onnxruntime; the ONNX comes
// from Debian's torch. Convoy's CPU inference runs its inference plan. With --repeat each case's
// engines run back to back, Convoy first in the first run and ONNX Runtime first in the second.
TEST(Bench, OnnxRuntimePeerTimesTheSameInferenceCase) {
  if (!fs::exists(kSource + "/third_party/node/node_modules/onnxruntime-node/package.json"))
    GTEST_SKIP() << "onnxruntime-node not installed (bash scripts/install-onnxruntime-node.sh)";
  if (convoy::testing::run_command("/usr/bin/python3 -c 'import torch' 2>&1").status != 0)
    GTEST_SKIP() << "Debian's python3-torch is not installed (it exports the ONNX model)";
  if (convoy::testing::run_command("node --version 2>&1").status != 0) GTEST_SKIP() << "no node on PATH";
  const fs::path dir = fs::temp_directory_path() / ("convoy_bench_ort_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const Result r = run_binary("bench --suite " + kSource + "/benchmarks/suites/quick.yaml --out " + (dir / "out").string() +
                                  " --devices cpu --peers onnxruntime --threads 1 --no-chart --repeat 2",
                              dir / "stderr.txt");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const size_t convoy1 = r.err.find("(run 1/2) lenet5 inference"), convoy2 = r.err.find("(run 2/2) lenet5 inference");
  ASSERT_NE(convoy1, std::string::npos) << r.err;
  ASSERT_NE(convoy2, std::string::npos) << r.err;
  const size_t ort1 = r.err.find("onnxruntime lenet5 inference", convoy1);
  ASSERT_NE(ort1, std::string::npos) << r.err;
  const size_t ort2 = r.err.find("onnxruntime lenet5 inference", ort1 + 1);
  ASSERT_NE(ort2, std::string::npos) << r.err;
  EXPECT_LT(ort1, convoy2) << r.err;  // run 1: Convoy, then ONNX Runtime, before run 2 begins
  EXPECT_LT(ort2, convoy2) << r.err;  // run 2: ONNX Runtime first
  std::ifstream in(dir / "out" / "results.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  int convoy = 0, ort = 0;
  for (const nlohmann::json& rec : doc.at("records")) {
    if (rec.at("mode") != "inference") continue;
    if (rec.at("engine") == "convoy") {
      ++convoy;
      EXPECT_EQ(rec.value("path", ""), "inference plan") << rec.dump(2);
      EXPECT_EQ(rec.value("threads_used", 0), 1) << rec.dump(2);
    } else if (rec.at("engine") == "onnxruntime") {
      ++ort;
      ASSERT_EQ(rec.at("status"), "ok") << rec.dump(2);
      EXPECT_EQ(rec.at("onnxruntime_version"), "1.30.0") << rec.dump(2);
      EXPECT_GT(rec.at("images_per_second").get<double>(), 0);
      EXPECT_GE(rec.at("p99_ms").get<double>(), rec.at("p50_ms").get<double>());
      EXPECT_GE(rec.at("rounds").get<int>(), 3);
    }
  }
  EXPECT_EQ(convoy, 1);
  EXPECT_EQ(ort, 1);
  EXPECT_NE(r.out.find("Convoy / ONNX Runtime"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

// The suite's peer_compile_modes reach the peer in its request; a torch without torch.compile
// (Debian's 1.13) makes the compiled peer "missing" with the reason, one note and no column.
TEST(Bench, CompiledPeerGetsTheSuitesModesAndIsMissingWithoutTorchCompile) {
  const std::string no_compile = "/usr/bin/python3 -c 'import torch, sys; sys.exit(hasattr(torch, \"compile\"))' 2>&1";
  if (convoy::testing::run_command(no_compile).status != 0)
    GTEST_SKIP() << "/usr/bin/python3 has no torch, or a torch with torch.compile (this checks the missing path)";
  const fs::path dir = fs::temp_directory_path() / ("convoy_bench_compiled_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    std::ifstream quick(kSource + "/benchmarks/suites/quick.yaml");
    std::stringstream text;
    text << quick.rdbuf();
    std::string suite = text.str();
    suite.replace(suite.find("../../models/"), 13, kSource + "/models/");
    std::ofstream(dir / "suite.yaml") << suite << "peer_compile_modes: [max-autotune-no-cudagraphs, default]\n";
  }
  const Result r = run_binary("bench --suite " + (dir / "suite.yaml").string() + " --out " + (dir / "out").string() +
                                  " --devices cpu --peers pytorch_compiled --no-chart",
                              dir / "stderr.txt");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::ifstream request_file(dir / "out" / "peer_cases.json");
  const nlohmann::json request = nlohmann::json::parse(request_file);
  EXPECT_EQ(request.at("compile_modes"), nlohmann::json({"max-autotune-no-cudagraphs", "default"}));
  EXPECT_EQ(request.at("augment"), nlohmann::json({{"crop_padding", 2}, {"horizontal_flip", true}}));
  std::ifstream in(dir / "out" / "results.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  int compiled = 0;
  for (const nlohmann::json& rec : doc.at("records")) {
    if (rec.at("engine") != "pytorch_compiled") continue;
    ++compiled;
    EXPECT_EQ(rec.at("status"), "missing") << rec.dump(2);
    EXPECT_NE(rec.value("reason", "").find("has no torch.compile"), std::string::npos) << rec.dump(2);
  }
  EXPECT_EQ(compiled, 2);  // training and inference
  EXPECT_NE(r.out.find("PyTorch compiled: missing (torch 1.13"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

// tf32 is a GPU math mode: its CPU rows are skipped with the reason, not run as fp32 again.
TEST(Bench, CpuBf16AndInt8AreRowsBesideFp32AndTf32IsSkipped) {
  const fs::path dir = fs::temp_directory_path() / ("convoy_bench_prec_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const Result r = run_binary("bench --suite " + kSource + "/benchmarks/suites/quick.yaml --out " + (dir / "out").string() +
                                  " --devices cpu --peers none --precision int8,bf16,tf32 --no-chart",
                              dir / "stderr.txt");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::ifstream in(dir / "out" / "results.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  std::map<std::string, nlohmann::json> by;  // "mode precision" -> record
  for (const nlohmann::json& rec : doc.at("records"))
    if (rec.at("engine") == "convoy") by[rec.at("mode").get<std::string>() + " " + rec.at("precision").get<std::string>()] = rec;
  ASSERT_EQ(by.size(), 8u) << doc.dump(2);
  for (const char* mode : {"inference tf32", "training tf32"}) {
    EXPECT_EQ(by[mode].at("status"), "skipped") << mode;
    EXPECT_NE(by[mode].value("reason", "").find("GPU math mode"), std::string::npos) << by[mode].dump(2);
  }
  EXPECT_EQ(by["inference fp32"].at("status"), "ok");
  EXPECT_EQ(by["inference int8"].at("status"), "ok") << by["inference int8"].dump(2);
  EXPECT_EQ(by["inference int8"].value("path", ""), "inference plan");
  EXPECT_EQ(by["training int8"].at("status"), "skipped");
  EXPECT_NE(by["training int8"].value("reason", "").find("inference precision"), std::string::npos);
  const nlohmann::json& bf16 = by["inference bf16"];
  if (bf16.at("status") == "skipped")
    EXPECT_NE(bf16.value("reason", "").find("AVX-512 BF16"), std::string::npos) << bf16.dump(2);
  else
    EXPECT_EQ(bf16.at("status"), "ok") << bf16.dump(2);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace convoy
