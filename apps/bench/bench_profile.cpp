#include "apps/bench/bench_profile.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "apps/bench/bench_runner.h"

namespace convoy {
namespace {

using Clock = std::chrono::steady_clock;

// Seconds of each call of each layer, forward and backward.
class LayerTimer final : public LayerObserver {
 public:
  LayerTimer(Backend& backend, size_t layers) : backend_(backend), forward_(layers), backward_(layers) {}
  void before(int, bool) override {
    backend_.synchronize();
    start_ = Clock::now();
  }
  void after(int node, bool backward) override {
    backend_.synchronize();
    (backward ? backward_ : forward_)[static_cast<size_t>(node)].push_back(
        std::chrono::duration<double>(Clock::now() - start_).count());
  }
  const std::vector<std::vector<double>>& forward() const { return forward_; }
  const std::vector<std::vector<double>>& backward() const { return backward_; }

 private:
  Backend& backend_;
  Clock::time_point start_;
  std::vector<std::vector<double>> forward_, backward_;
};

// Clears the model's observer however the profiled steps end.
struct ObserverScope {
  Model& model;
  ObserverScope(Model& m, LayerObserver* o) : model(m) { model.set_observer(o); }
  ~ObserverScope() { model.set_observer(nullptr); }
};

nlohmann::json median_ms(const std::vector<double>& seconds) {
  return seconds.empty() ? nlohmann::json(nullptr) : nlohmann::json(median_of(seconds) * 1e3);
}

double ms_or_zero(const nlohmann::json& v) { return v.is_number() ? v.get<double>() : 0.0; }

// The same steps again with their GPU kernels traced: without the observer, whose synchronizations
// would leave the device idle between layers and make it a different step.
void add_kernels(Backend& backend, const std::function<void()>& step, int64_t steps, nlohmann::json& profile) {
  constexpr size_t kListed = 50;
  std::string why_not;
  std::vector<KernelTime> kernels;
  double seconds = 0;
  if (std::unique_ptr<KernelTrace> trace = backend.trace_kernels(why_not)) {  // stopped however the steps end
    const auto start = Clock::now();
    for (int64_t s = 0; s < steps; ++s) step();
    backend.synchronize();
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
    kernels = trace->stop(why_not);
  }
  if (!why_not.empty()) {
    profile["kernels_note"] = why_not;
    return;
  }
  const double n = static_cast<double>(std::max<int64_t>(steps, 1));
  double total_ms = 0;
  for (const KernelTime& k : kernels) total_ms += k.total_ms;
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < std::min(kListed, kernels.size()); ++i)
    list.push_back({{"name", kernels[i].name},
                    {"calls_per_step", static_cast<double>(kernels[i].calls) / n},
                    {"ms_per_step", kernels[i].total_ms / n},
                    {"share", kernels[i].total_ms / std::max(total_ms, 1e-12)}});
  profile["kernels"] = std::move(list);  // slowest first, the first kListed
  profile["kernels_distinct"] = kernels.size();
  profile["kernels_ms_per_step"] = total_ms / n;
  profile["kernels_step_ms"] = seconds * 1e3 / n;  // wall time of a traced step, queued back to back
}

}  // namespace

nlohmann::json profile_layers(Backend& backend, Model& model, const std::function<void()>& step, int64_t steps) {
  const std::vector<LayerInfo> infos = model.layer_infos();
  LayerTimer timer(backend, infos.size());
  std::vector<double> step_seconds;
  {
    ObserverScope scope(model, &timer);
    for (int64_t s = 0; s < steps; ++s) {
      const auto start = Clock::now();
      step();
      backend.synchronize();
      step_seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
  }
  nlohmann::json layers = nlohmann::json::array();
  for (size_t i = 0; i < infos.size(); ++i)
    layers.push_back({{"name", infos[i].name}, {"type", infos[i].type}, {"forward_ms", median_ms(timer.forward()[i])},
                      {"backward_ms", median_ms(timer.backward()[i])}});
  nlohmann::json profile = {
      {"steps", steps},
      {"step_ms", median_ms(step_seconds)},
      {"layers", layers},
      {"note", "each layer timed alone (device synchronized before and after it), median of the steps; "
               "the rest of the step (loss, gradient sums, optimizer, casts) is 'other'"}};
  add_kernels(backend, step, steps, profile);
  return profile;
}

std::string profile_table(const nlohmann::json& profile, size_t top) {
  struct Row {
    std::string name, type;
    double forward, backward;
  };
  std::vector<Row> rows;
  double layers_total = 0;
  for (const nlohmann::json& l : profile.at("layers")) {
    rows.push_back({l.at("name"), l.at("type"), ms_or_zero(l.at("forward_ms")), ms_or_zero(l.at("backward_ms"))});
    layers_total += rows.back().forward + rows.back().backward;
  }
  const double step = ms_or_zero(profile.at("step_ms"));
  std::ostringstream out;
  out << std::fixed << std::setprecision(3);
  out << "  per-layer times (" << profile.at("steps").get<int64_t>() << " synchronized steps, median): step " << step
      << " ms, layers " << layers_total << " ms, other " << std::max(0.0, step - layers_total) << " ms\n";
  std::map<std::string, std::pair<double, double>> by_type;  // type -> (forward, backward)
  for (const Row& r : rows) {
    by_type[r.type].first += r.forward;
    by_type[r.type].second += r.backward;
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.forward + a.backward > b.forward + b.backward; });
  out << "  " << std::left << std::setw(28) << "layer" << std::setw(14) << "type" << std::right << std::setw(12)
      << "forward ms" << std::setw(13) << "backward ms" << std::setw(8) << "share\n";
  const double total = std::max(layers_total, 1e-12);
  for (size_t i = 0; i < std::min(top, rows.size()); ++i) {
    const Row& r = rows[i];
    out << "  " << std::left << std::setw(28) << r.name << std::setw(14) << r.type << std::right << std::setw(12)
        << r.forward << std::setw(13) << r.backward << std::setw(6) << std::setprecision(1)
        << 100 * (r.forward + r.backward) / total << "%\n"
        << std::setprecision(3);
  }
  out << "  by type:";
  for (const auto& [type, t] : by_type)
    out << " " << type << " " << t.first << " + " << t.second << " ms;";
  out << "\n";
  if (!profile.contains("kernels")) {
    out << "  kernels: not traced: " << profile.value("kernels_note", std::string("no trace"))
        << "; benchmarks/gpu/profile.sh (Nsight Compute) lists the top kernels of a step\n";
    return out.str();
  }
  const nlohmann::json& kernels = profile.at("kernels");
  const double kernels_ms = profile.at("kernels_ms_per_step").get<double>();
  const double traced_step = profile.at("kernels_step_ms").get<double>();
  // Against the traced steps' own time: the synchronized steps above idle the GPU between layers.
  out << "  kernels (CUPTI, " << profile.at("steps").get<int64_t>() << " steps back to back): " << kernels_ms
      << " ms/step in " << profile.at("kernels_distinct").get<size_t>() << " kernels, of a " << traced_step
      << " ms step (" << std::setprecision(1) << 100 * kernels_ms / std::max(traced_step, 1e-12) << "%)\n"
      << std::setprecision(3);
  out << "  " << std::right << std::setw(10) << "ms/step" << std::setw(12) << "calls/step" << std::setw(8) << "share"
      << "  kernel\n";
  for (size_t i = 0; i < std::min(top, kernels.size()); ++i) {
    const nlohmann::json& k = kernels[i];
    out << "  " << std::setw(10) << k.at("ms_per_step").get<double>() << std::setw(12) << std::setprecision(1)
        << k.at("calls_per_step").get<double>() << std::setw(7) << 100 * k.at("share").get<double>() << "%  "
        << k.at("name").get<std::string>() << "\n"
        << std::setprecision(3);
  }
  return out.str();
}

}  // namespace convoy
