#include "apps/bench/bench_runner.h"

#include <omp.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <thread>

#include "apps/bench/shell.h"
#include "engine/core/counter_rng.h"
#include "engine/core/error.h"
#include "engine/core/usable_cpus.h"
#include "engine/graph/model.h"
#include "engine/inference/eight_bit_graph.h"
#include "engine/inference/graphed_forward.h"
#include "engine/inference/inference_plan.h"
#include "engine/inference/quantize.h"
#include "engine/train/train_step.h"
#include "apps/bench/bench_profile.h"

namespace convoy {

namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double last3_spread(const std::vector<double>& rounds) {
  if (rounds.size() < 2) return 0;
  const size_t n = std::min<size_t>(3, rounds.size());
  std::vector<double> last(rounds.end() - static_cast<std::ptrdiff_t>(n), rounds.end());
  const auto [lo, hi] = std::minmax_element(last.begin(), last.end());
  const double mid = median_of(last);
  return mid > 0 ? (*hi - *lo) / mid : 0;
}

// A command's stdout less trailing newlines and spaces, and its exit status; "" when it cannot run.
std::string capture(const std::string& command, int* status = nullptr) {
  ShellResult r = shell_run(command);
  if (status) *status = r.status;
  while (!r.output.empty() && (r.output.back() == '\n' || r.output.back() == '\r' || r.output.back() == ' '))
    r.output.pop_back();
  return r.output;
}

// "Key: value (more)" -> "value (more)" for the first line starting with `prefix`, else null.
nlohmann::json line_value(const std::vector<std::string>& lines, const std::string& prefix) {
  for (const std::string& line : lines)
    if (line.rfind(prefix, 0) == 0) {
      std::string v = line.substr(prefix.size());
      v.erase(0, v.find_first_not_of(" :"));
      return v;
    }
  return nullptr;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json finite_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(values.size() - 1, lo + 1);
  return values[lo] + (values[hi] - values[lo]) * (pos - static_cast<double>(lo));
}

double median_of(std::vector<double> values) { return percentile(std::move(values), 0.5); }

TimingResult measure_iterations(const std::function<void()>& step, const std::function<void()>& sync,
                                const BenchTiming& t, const std::function<double()>& clock_in,
                                const std::function<ThreadTimes()>& books_in) {
  const std::function<double()> clock = clock_in ? clock_in : std::function<double()>(steady_seconds);
  const std::function<ThreadTimes()> books = books_in ? books_in : std::function<ThreadTimes()>(this_thread_times);
  TimingResult r;
  const double start = clock();

  // Warm-up, synchronized per iteration: module loads, algorithm searches and first-touch
  // allocations stay out, and the iteration time it gives sizes the rounds.
  std::vector<double> warm;
  for (;;) {
    const double a = clock();
    step();
    sync();
    warm.push_back(clock() - a);
    const double elapsed = clock() - start;
    const auto n = static_cast<int64_t>(warm.size());
    if (n >= t.warmup_iterations && elapsed >= t.warmup_seconds) break;
    if (n >= 2 && elapsed >= 0.25 * t.max_seconds) break;  // slow iterations: keep time for rounds
  }
  r.warmup_iterations = static_cast<int64_t>(warm.size());
  // The first warm-up iteration carries one-time costs: estimate from the later ones.
  std::vector<double> recent(warm.size() > 1 ? warm.begin() + 1 : warm.begin(), warm.end());
  if (recent.size() > 3) recent.erase(recent.begin(), recent.end() - 3);
  const double estimate = std::max(1e-9, median_of(recent));
  const auto k = static_cast<int64_t>(std::clamp(std::llround(t.round_seconds / estimate), 1LL, 1000000LL));
  r.iterations_per_round = k;

  // Rounds of k asynchronous iterations closed by one sync: the device queue stays full,
  // as in training, and the host clock around the sync is exact for the whole round.
  std::vector<double> rounds;
  for (;;) {
    const double a = clock();
    for (int64_t i = 0; i < k; ++i) step();
    sync();
    rounds.push_back((clock() - a) / static_cast<double>(k));
    r.spread = last3_spread(rounds);
    const auto n = static_cast<int64_t>(rounds.size());
    if (n >= t.min_rounds && r.spread <= t.stable_spread) {
      r.stable = true;
      break;
    }
    // The caps apply once min_rounds exist: fewer rounds would be no median at all.
    if (n >= t.min_rounds && (n >= t.max_rounds || clock() - start >= t.max_seconds)) break;
  }
  r.rounds = static_cast<int64_t>(rounds.size());
  r.median = median_of(rounds);

  // Latency: one synchronized iteration per sample. Rounds of one iteration are such samples
  // already; the phase still runs after them, so that a slow pass's p99 is not just the
  // slowest of a handful of rounds.
  // The thread's books are read just outside each sample's clock, so their cost stays out of it.
  if (k == 1) r.latencies = rounds;
  r.latency_times.resize(r.latencies.size());
  const double lat_start = clock();
  while (static_cast<int64_t>(r.latencies.size()) < t.latency_samples) {
    const ThreadTimes before = books();
    const double a = clock();
    step();
    sync();
    const double b = clock();
    r.latency_times.push_back(books() - before);
    r.latencies.push_back(b - a);
    if (b - lat_start >= t.latency_seconds) break;
  }
  r.p50 = percentile(r.latencies, 0.50);
  r.p99 = percentile(r.latencies, 0.99);
  r.seconds = clock() - start;
  return r;
}

double bench_flops_per_iteration(int64_t forward_flops_per_image, int64_t batch, const std::string& mode) {
  return static_cast<double>(forward_flops_per_image) * static_cast<double>(batch) * (mode == "training" ? 3.0 : 1.0);
}

namespace {

nlohmann::json base_record(const BenchCase& c) {
  return {{"engine", "convoy"}, {"model", c.model}, {"model_path", c.model_path}, {"mode", c.mode},
          {"batch", c.batch}, {"device", c.device}, {"precision", to_string(c.precision)}};
}

}  // namespace

nlohmann::json skipped_bench_record(const BenchCase& c, const std::string& reason) {
  nlohmann::json rec = base_record(c);
  rec["status"] = "skipped";
  rec["reason"] = reason;
  return rec;
}

nlohmann::json run_bench_case(Backend& backend, const BenchSuite& suite, const BenchCase& c,
                              const BenchTiming& timing, double peak_tflops, const std::string& peak_note,
                              const std::string& device_name) {
  nlohmann::json rec = base_record(c);
  rec["device_name"] = device_name;
  const bool training = c.mode == "training";
  // The CPU keeps f32 weights; its bf16 and int8 are the inference plan's precisions.
  const bool cpu_plan_precision = backend.device().is_cpu() && c.precision != Precision::fp32;
  // A GPU's 8-bit plan reads its input in bf16 (its stem is bf16).
  const bool gpu_eight_bit = backend.device().is_cuda() && is_eight_bit(c.precision);
  const DType dtype = (c.precision == Precision::bf16 && !cpu_plan_precision) || gpu_eight_bit ? DType::bf16 : DType::f32;
  const Layout layout = choose_layout(suite.gpu_layout, backend, dtype);
  rec["layout"] = layout == Layout::nhwc ? "nhwc" : "nchw";
  try {
    Model model = Model::from_file(c.model_path, suite.seed);
    model.set_fusion(suite.engine.fusion);
    model.to(backend, dtype, layout);
    const Shape& in = model.input_shape();  // (C, H, W)
    const int64_t channels = in[0];
    const int64_t classes = model.num_classes();
    if (suite.mean.size() != 1 && static_cast<int64_t>(suite.mean.size()) != channels)
      throw InputError(suite.source + ": normalize gives " + std::to_string(suite.mean.size()) +
                       " channel(s) but model '" + model.name() + "' takes " + std::to_string(channels));
    if (channels > 4) throw InputError("model '" + model.name() + "': normalization supports at most 4 channels");
    NormalizeAugment plain;
    for (int64_t ch = 0; ch < channels; ++ch) {
      const size_t i = suite.mean.size() == 1 ? 0 : static_cast<size_t>(ch);
      plain.mean[ch] = static_cast<float>(suite.mean[i]);
      plain.std[ch] = static_cast<float>(suite.std[i]);
    }
    NormalizeAugment augment = plain;
    augment.crop_padding = suite.crop_padding;
    augment.horizontal_flip = suite.horizontal_flip;

    // Random u8 images and labels (never zeros), a few distinct sets, already on the device.
    std::mt19937_64 rng(counter_hash(suite.seed, static_cast<uint64_t>(c.batch)));
    const Shape shape{c.batch, in[0], in[1], in[2]};  // (N, C, H, W)
    std::vector<Tensor> images, labels;
    for (int64_t set = 0; set < suite.input_sets; ++set) {
      Tensor img = Tensor::empty(shape, DType::u8);
      uint8_t* p = img.data<uint8_t>();
      const int64_t n = img.numel();
      for (int64_t i = 0; i < n; i += 8) {
        uint64_t bits = rng();
        for (int64_t j = i; j < std::min(n, i + 8); ++j, bits >>= 8) p[j] = static_cast<uint8_t>(bits);
      }
      std::vector<int32_t> lab(static_cast<size_t>(c.batch));
      for (auto& l : lab) l = static_cast<int32_t>(rng() % static_cast<uint64_t>(classes));
      images.push_back(backend.upload(img));
      labels.push_back(backend.upload(Tensor::from_ints(lab, {c.batch})));
    }

    int64_t iteration = 0;
    Tensor last_loss, last_logits;
    std::unique_ptr<TrainStep> train_step;
    std::unique_ptr<InferencePlan> plan;
    std::unique_ptr<GraphedForward> graphed;
    std::unique_ptr<CompiledForward> eight_bit;
    std::unique_ptr<RecordedWork> eight_bit_recording;
    Tensor plan_input;
    std::function<void()> step;
    if (training) {
      train_step = std::make_unique<TrainStep>(
          backend, model, TrainRecipe{suite.optimizer, augment, suite.label_smoothing, suite.seed});
      if (!suite.cuda_graphs || !suite.engine.cuda_graphs) train_step->set_recording(false);
      // The trainer's own step, at the suite's constant learning rate.
      step = [&] {
        const size_t i = static_cast<size_t>(iteration) % images.size();
        last_loss = train_step->run(images[i], labels[i], iteration++, suite.optimizer.lr).loss;
      };
    } else if (suite.cpu_inference_plan && backend.device().is_cpu() && dtype == DType::f32 &&
               (cpu_plan_precision || InferencePlan::unsupported_reason(model).empty())) {
      // CPU inference as `convoy infer` runs it: the plan, built once before the timing.
      InferenceOptions o;
      o.threads = static_cast<int>(suite.threads);
      o.flops_per_thread = kFlopsPerThread;
      o.winograd = suite.engine.winograd;
      o.layout = suite.engine.plan_layout;
      o.adaptive_team = suite.engine.adaptive_team;
      o.precision = c.precision;
      plan_input = backend.empty(shape, dtype);  // (N, C, H, W)
      if (o.precision == Precision::int8) {
        // Random weights: the ranges come from this case's own random images (speed, not accuracy).
        backend.ops().normalize_augment(images[0], plain, 0, plan_input);
        o.activation_max = calibrate_activation_max(model, {plan_input}, o.threads);
        rec["calibration"] = "the case's random input";
      }
      plan = std::make_unique<InferencePlan>(model, c.batch, o);
      rec["path"] = "inference plan";
      rec["threads_used"] = plan->threads();
      rec["plan_layout"] = plan->layout() == PlanLayout::blocked ? "nChw16c" : "oneDNN's";
      step = [&] {
        const size_t i = static_cast<size_t>(iteration++) % images.size();
        backend.ops().normalize_augment(images[i], plain, 0, plan_input);
        last_logits = plan->run(plan_input);  // (N, classes)
      };
    } else if (gpu_eight_bit) {
      // The GPU's 8-bit plan as GraphedBatches serves it: compiled for this batch, recorded once.
      // Random weights: the ranges come from a few of the case's random images, run through a copy
      // of the model on the CPU (speed, not accuracy).
      Model reference = Model::from_file(c.model_path, suite.seed);
      const std::unique_ptr<Backend> cpu = make_cpu_backend({});
      reference.to(*cpu, DType::f32);
      const int64_t rows = std::min<int64_t>(c.batch, 8);
      Tensor sample = cpu->empty({rows, in[0], in[1], in[2]}, DType::f32);
      cpu->ops().normalize_augment(images[0].slice_rows(0, rows).to_cpu(), plain, 0, sample);
      const std::vector<float> ranges = calibrate_activation_max(reference, {sample});
      rec["calibration"] = "the case's random input";
      const EightBitGraph graph = eight_bit_graph(model, ranges, eight_bit_type(c.precision));
      eight_bit = backend.compile_8bit(graph, c.batch);
      rec["eight_bit_convolutions"] = eight_bit->eight_bit_convolutions();
      rec["eight_bit_plan"] = eight_bit->describe();
      eight_bit->run();  // a plain pass: the bf16 steps' scratch buffers grow outside the recording
      eight_bit_recording = backend.record([&] { eight_bit->run(); });
      rec["path"] = eight_bit_recording ? "8-bit plan, cuda graph" : "8-bit plan";
      step = [&] {
        const size_t i = static_cast<size_t>(iteration++) % images.size();
        backend.ops().normalize_augment(images[i], plain, 0, eight_bit->input());
        if (eight_bit_recording) eight_bit_recording->replay();
        else eight_bit->run();
        last_logits = eight_bit->output();
      };
    } else if (suite.cuda_graphs && backend.device().is_cuda()) {
      // GPU inference from one CUDA graph per batch size (recorded on the warm-up's first step).
      rec["batch_norms_folded"] = model.fold_batch_norms(backend);  // as GraphedBatches serves it
      graphed = std::make_unique<GraphedForward>(backend, model);
      rec["path"] = "cuda graph";
      step = [&] {
        const size_t i = static_cast<size_t>(iteration++) % images.size();
        Tensor x = backend.empty(images[i].shape(), dtype, layout);  // (N, C, H, W)
        backend.ops().normalize_augment(images[i], plain, 0, x);
        last_logits = graphed->run(x);  // (N, classes), the graph's own buffer
      };
    } else {
      rec["path"] = "layer by layer";
      step = [&] {
        const size_t i = static_cast<size_t>(iteration++) % images.size();
        Tensor x = backend.empty(images[i].shape(), dtype, layout);  // (N, C, H, W)
        backend.ops().normalize_augment(images[i], plain, 0, x);
        last_logits = model.forward(backend, x, StepInfo{});  // (N, classes)
      };
    }
    const TimingResult t = measure_iterations(step, [&] { backend.synchronize(); }, timing);
    if (plan) rec["threads_at_end"] = plan->running_threads();  // smaller where other work took cores
    if (graphed && !graphed->last_run_replayed()) rec["path"] = "layer by layer (no CUDA graph could be recorded)";
    if (train_step) rec["path"] = train_step->last_run_replayed() ? "cuda graph" : "layer by layer";
    if (timing.profile_steps > 0) {
      // The plan runs fused layers, so its layers are timed on the layer-by-layer forward.
      const std::function<void()> layer_by_layer = [&] {
        Tensor x = backend.empty(images[0].shape(), dtype, layout);  // (N, C, H, W)
        backend.ops().normalize_augment(images[0], plain, 0, x);
        model.forward(backend, x, StepInfo{});
      };
      // The 8-bit plan runs no layers: its own steps give the kernel trace (and no layer times).
      rec["profile"] = profile_layers(backend, model, (plan || graphed) && !eight_bit ? layer_by_layer : step,
                                      timing.profile_steps);
      if (eight_bit) rec["profile"]["path"] = "the 8-bit plan's kernels (it runs no layers of the model)";
      if (plan) rec["profile"]["path"] = "layer by layer (the case itself runs the fused inference plan)";
      if (graphed) rec["profile"]["path"] = "layer by layer (the case itself replays a CUDA graph)";
    }

    // A benchmark of garbage is no benchmark: the outputs must be finite.
    if (training) {
      const float loss = last_loss.to_floats()[0];
      if (!std::isfinite(loss)) throw InternalError("the training loss became " + std::to_string(loss));
      rec["final_loss"] = loss;
    } else {
      for (float v : last_logits.to_floats())
        if (!std::isfinite(v)) throw InternalError("inference produced a non-finite logit");
    }

    const int64_t flops_per_image = model.forward_flops();
    const double flops = bench_flops_per_iteration(flops_per_image, c.batch, c.mode);
    const double tflops = flops / t.median / 1e12;
    rec["status"] = "ok";
    rec["model"] = model.name();
    rec["images_per_second"] = static_cast<double>(c.batch) / t.median;
    rec["ms_per_iteration"] = t.median * 1e3;
    rec["p50_ms"] = t.p50 * 1e3;
    rec["p99_ms"] = t.p99 * 1e3;
    rec["latency_samples"] = t.latencies.size();
    if (nlohmann::json slow = slow_samples(t.latencies, t.latency_times, t.p50, kSlowSampleFactor); !slow.is_null())
      rec["slow_samples"] = std::move(slow);
    rec["warmup_iterations"] = t.warmup_iterations;
    rec["rounds"] = t.rounds;
    rec["iterations_per_round"] = t.iterations_per_round;
    rec["spread"] = t.spread;
    rec["stable"] = t.stable;
    rec["seconds"] = t.seconds;
    rec["forward_flops_per_image"] = flops_per_image;
    rec["flops_per_iteration"] = flops;
    rec["tflops"] = tflops;
    rec["peak_tflops"] = peak_tflops > 0 ? nlohmann::json(peak_tflops) : nlohmann::json(nullptr);
    rec["fraction_of_peak"] = peak_tflops > 0 ? finite_or_null(tflops / peak_tflops) : nlohmann::json(nullptr);
    rec["peak_note"] = peak_note;
  } catch (const std::bad_alloc&) {
    rec["status"] = "failed";
    rec["reason"] = "out of memory";
  } catch (const std::exception& e) {
    rec["status"] = "failed";
    rec["reason"] = e.what();
  }
  return rec;
}

std::string gpu_name_from_describe(const std::string& describe) {
  const size_t open = describe.find('(');
  if (describe.rfind("cuda", 0) != 0 || open == std::string::npos) return "";
  const size_t end = describe.find_first_of(",)", open);
  return describe.substr(open + 1, end == std::string::npos ? std::string::npos : end - open - 1);
}

nlohmann::json bench_environment(const std::string& source_dir, int64_t threads) {
  nlohmann::json env;
  const std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  env["date"] = date;
  env["convoy_version"] = CONVOY_VERSION;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  env["hostname"] = host;
  utsname uts{};
  if (uname(&uts) == 0) env["kernel"] = std::string(uts.sysname) + " " + uts.release + " " + uts.machine;
#if defined(__clang__)
  env["compiler"] = "clang " __clang_version__;
#elif defined(__GNUC__)
  env["compiler"] = "g++ " __VERSION__;
#endif

  int status = 0;
  std::string commit;
  for (const std::string& dir : {source_dir, std::string(".")}) {
    if (dir.empty()) continue;
    commit = capture("git -C " + shell_quote(dir) + " rev-parse HEAD 2>/dev/null", &status);
    if (status == 0 && commit.size() == 40) {
      const std::string dirty =
          capture("git -C " + shell_quote(dir) + " status --porcelain --untracked-files=no 2>/dev/null");
      env["git_commit"] = commit;
      env["git_dirty"] = !dirty.empty();
      break;
    }
    commit.clear();
  }
  if (commit.empty()) env["git_commit"] = nullptr;

  const std::string cpuinfo = read_text_file("/proc/cpuinfo");
  const CpuPeak cpu = estimate_cpu_peak(cpuinfo, threads);
  env["cpu_model"] = cpu.model_name.empty() ? nlohmann::json(nullptr) : nlohmann::json(cpu.model_name);
  env["cpu_logical_processors"] = std::thread::hardware_concurrency();
  env["cpu_usable"] = usable_cpus();  // the affinity mask and any cgroup CPU quota
  env["threads"] = threads > 0 ? threads : omp_get_max_threads();
  // Other work on the machine skews CPU figures: record the load when the run began.
  const std::string loadavg = read_text_file("/proc/loadavg");
  env["loadavg"] = loadavg.empty() ? nlohmann::json(nullptr) : nlohmann::json(loadavg.substr(0, loadavg.find('\n')));
  // Threading settings that change CPU figures (OpenMP spin-waiting on a busy machine).
  nlohmann::json vars = nlohmann::json::object();
  for (const char* name : {"OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_PROC_BIND", "DNNL_MAX_CPU_ISA"})
    if (const char* v = std::getenv(name)) vars[name] = v;
  env["threading_env"] = vars;
  const std::vector<std::string> cpu_lines = cpu_doctor_lines();
  env["cpu_lines"] = cpu_lines;
  nlohmann::json onednn = line_value(cpu_lines, "oneDNN");
  if (onednn.is_string()) {
    const std::string v = onednn.get<std::string>();
    onednn = v.substr(0, v.find(' '));
  }
  env["onednn"] = onednn;

  const std::vector<std::string> cuda_lines = cuda_doctor_lines();
  env["cuda_lines"] = cuda_lines;
  const std::string why = cuda_unavailable_reason();
  env["gpu_unavailable_reason"] = why.empty() ? nlohmann::json(nullptr) : nlohmann::json(why);
  env["cuda_driver"] = line_value(cuda_lines, "CUDA driver");
  env["cuda_runtime"] = line_value(cuda_lines, "CUDA runtime");
  env["cudnn"] = line_value(cuda_lines, "cuDNN");
  env["cublas"] = line_value(cuda_lines, "cuBLAS");
  nlohmann::json gpu = nullptr;
  for (const std::string& line : cuda_lines)
    if (line.rfind("cuda:0: ", 0) == 0) gpu = line.substr(8, line.find(',') - 8);
  env["gpu"] = gpu;
  // The driver's own version (e.g. 580.95) only nvidia-smi knows; absent without a driver.
  const std::string smi = capture("nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null", &status);
  env["nvidia_driver"] = status == 0 && !smi.empty() ? nlohmann::json(smi.substr(0, smi.find('\n'))) : nlohmann::json(nullptr);
  return env;
}

}  // namespace convoy
