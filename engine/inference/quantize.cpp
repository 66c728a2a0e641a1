#include "engine/inference/quantize.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <sstream>

#include "engine/core/error.h"
#include "engine/inference/inference_plan.h"

namespace convoy {

void check_activation_range(const std::string& name, double range, bool quantized, const std::string& source) {
  if ((range == 0 && !quantized) || (range >= kMinActivationRange && range <= kMaxActivationRange)) return;
  std::ostringstream out;
  out << source << ": int8 activation range of " << (name == kQuantInputName ? "the input" : "layer '" + name + "'")
      << " is " << range;
  if (range == 0)
    out << ", but the int8 plan quantizes that tensor with it (every value but 0 would saturate)";
  else
    out << "; expected a finite number from " << kMinActivationRange << " to " << kMaxActivationRange
        << " (or 0 for a layer fused into the next)"
        << (range > 0 && range < kMinActivationRange ? ": a smaller range makes every int8 value of that tensor saturate"
                                                      : "");
  out << "; the file is damaged or was not written by convoy quantize: quantize the fp32 checkpoint again";
  throw InputError(out.str());
}

void ActivationHistogram::add(const float* values, size_t n) {
  if (keep_bins_ && bins_.empty()) bins_.assign(kBins, 0);
  float mx = max_;
  uint64_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const float a = std::fabs(values[i]);
    if (!(a <= std::numeric_limits<float>::max())) {  // inf or NaN
      ++bad;
      continue;
    }
    mx = std::max(mx, a);
    if (keep_bins_) ++bins_[std::bit_cast<uint32_t>(a) >> 16];
  }
  max_ = mx;
  count_ += n - bad;
  non_finite_ += bad;
}

void ActivationHistogram::clear() {
  std::fill(bins_.begin(), bins_.end(), 0);
  count_ = non_finite_ = 0;
  max_ = 0;
}

void ActivationHistogram::merge(const ActivationHistogram& other) {
  if (!other.bins_.empty()) {
    if (bins_.empty()) bins_.assign(kBins, 0);
    for (size_t i = 0; i < kBins; ++i) bins_[i] += other.bins_[i];
  }
  max_ = std::max(max_, other.max_);
  count_ += other.count_;
  non_finite_ += other.non_finite_;
}

float ActivationHistogram::percentile(double percent) const {
  if (bins_.empty() || count_ == 0 || percent >= 100) return max_;
  // The smallest bin with at least this many values at or below it.
  const auto want = static_cast<uint64_t>(std::ceil(static_cast<double>(count_) * percent / 100.0));
  uint64_t seen = 0;
  for (size_t i = 0; i < kBins; ++i) {
    seen += bins_[i];
    if (seen >= want && seen > 0) {
      // The bin's upper edge: its last bit pattern (the values in it are at most that).
      const float edge = std::bit_cast<float>(static_cast<uint32_t>(((i + 1) << 16) - 1));
      return std::min(edge, max_);
    }
  }
  return max_;
}

const char* calibration_method_name(CalibrationMethod method) {
  return method == CalibrationMethod::percentile ? "percentile" : "max";
}

std::vector<float> calibrate_activation_ranges(Model& model, const std::vector<Tensor>& batches,
                                               const Calibration& calibration) {
  if (batches.empty()) throw InputError("calibration of model '" + model.name() + "': no calibration images");
  if (!(calibration.percentile > 0 && calibration.percentile <= 100))
    throw InputError("calibration percentile " + std::to_string(calibration.percentile) +
                     ": expected a number in (0, 100], e.g. 99.99");
  InferenceOptions options;
  options.threads = calibration.threads;
  std::map<int64_t, std::unique_ptr<InferencePlan>> plans;  // one per batch size (the last may be smaller)
  const bool bins = calibration.method == CalibrationMethod::percentile;
  std::vector<ActivationHistogram> stats(model.graph_nodes().size() + 1, ActivationHistogram(bins));
  for (const Tensor& x : batches) {
    auto& plan = plans[x.dim(0)];
    if (!plan) plan = std::make_unique<InferencePlan>(model, x.dim(0), options);
    plan->calibrate(x, stats);
  }
  std::vector<float> node_max(stats.size(), 0.0f);
  for (size_t i = 0; i < stats.size(); ++i) {
    if (stats[i].non_finite() > 0)
      throw NumericError("calibration of model '" + model.name() + "': a range is not finite");
    node_max[i] = bins ? stats[i].percentile(calibration.percentile) : stats[i].max();
  }
  const std::vector<Model::GraphNode> nodes = model.graph_nodes();
  const std::vector<bool> quantized = InferencePlan::quantized_outputs(model);
  for (size_t i = 0; i < node_max.size(); ++i)
    if ((i == 0 || quantized[i - 1]) && node_max[i] < kMinActivationRange) {
      std::ostringstream out;
      out << "calibration of model '" << model.name() << "': "
          << (i == 0 ? std::string("the input") : "the output of layer '" + nodes[i - 1].layer->name() + "'")
          << " is at most " << node_max[i] << " on every calibration image: too small a range to quantize (at least "
          << kMinActivationRange << "); calibrate on other images, or check the model's weights";
      throw InputError(out.str());
    }
  return node_max;
}

std::map<std::string, double> activation_max_by_name(Model& model, const std::vector<float>& node_max) {
  const std::vector<Model::GraphNode> nodes = model.graph_nodes();
  CONVOY_CHECK(node_max.size() == nodes.size() + 1, "activation ranges: one per node and the input");
  std::map<std::string, double> named{{kQuantInputName, node_max[0]}};
  for (size_t i = 0; i < nodes.size(); ++i) named[nodes[i].layer->name()] = node_max[i + 1];
  return named;
}

std::vector<float> activation_max_by_node(Model& model, const std::map<std::string, double>& named,
                                          const std::string& source) {
  const std::vector<Model::GraphNode> nodes = model.graph_nodes();
  std::vector<float> out(nodes.size() + 1, 0.0f);
  const std::vector<bool> quantized = InferencePlan::quantized_outputs(model);
  auto take = [&](const std::string& name, bool used) {
    auto it = named.find(name);
    if (it == named.end())
      throw InputError(source + ": checkpoint metadata 'int8_activation_max' has no range for '" + name + "'");
    check_activation_range(name, it->second, used, source);
    return static_cast<float>(it->second);
  };
  out[0] = take(kQuantInputName, true);
  for (size_t i = 0; i < nodes.size(); ++i) out[i + 1] = take(nodes[i].layer->name(), quantized[i]);
  if (named.size() != nodes.size() + 1)
    throw InputError(source + ": checkpoint metadata 'int8_activation_max' has " + std::to_string(named.size()) +
                     " ranges, the model " + std::to_string(nodes.size() + 1) + " tensors (input and layers)");
  return out;
}

}  // namespace convoy
