#include "engine/graph/load_weights.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "engine/core/error.h"

namespace convoy {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// PyTorch's BatchNorm counts its batches (for momentum=None); Convoy's momentum is fixed.
bool is_batch_counter(const std::string& name) { return ends_with(name, ".num_batches_tracked"); }
// A Convoy checkpoint's optimizer state ("optim.<parameter>.momentum"): fine-tuning starts afresh.
bool is_optimizer_state(const std::string& name) { return name.rfind("optim.", 0) == 0; }

std::string list(const std::vector<std::string>& names, size_t most = 8) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < most; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > most) out += ", ... (" + std::to_string(names.size() - most) + " more)";
  return out;
}

}  // namespace

std::string WeightsLoadReport::str(const std::string& source) const {
  std::ostringstream out;
  out << "init weights: loaded " << loaded.size() << " of " << loaded.size() + missing.size() + mismatched.size() + classifier.size()
      << " tensors of the model from " << source << "\n";
  if (!classifier.empty())
    out << "  classifier resized to the run's num_classes, freshly initialized: " << list(classifier) << "\n";
  if (!mismatched.empty()) out << "  mis-shaped (left as initialized): " << list(mismatched) << "\n";
  if (!missing.empty()) out << "  missing in the file (left as initialized): " << list(missing) << "\n";
  if (!unexpected.empty()) out << "  unexpected (not in the model, ignored): " << list(unexpected) << "\n";
  const auto counters = std::count_if(ignored.begin(), ignored.end(), is_batch_counter);
  if (counters)
    out << "  ignored: " << counters << " num_batches_tracked counters (Convoy's batch norm keeps none)\n";
  if (counters != static_cast<std::ptrdiff_t>(ignored.size()))
    out << "  ignored: " << ignored.size() - counters << " optimizer state tensors (the run starts a fresh optimizer)\n";
  return out.str();
}

WeightsLoadReport load_matching_weights(Model& model, const std::vector<NamedTensor>& tensors,
                                        const std::vector<std::pair<std::string, std::string>>& foreign,
                                        const std::string& resized_classifier, bool strict,
                                        const std::string& source) {
  WeightsLoadReport report;
  std::map<std::string, const Tensor*> by_name;
  for (const NamedTensor& t : tensors) {
    if (is_batch_counter(t.name)) report.ignored.push_back(t.name);
    else by_name[t.name] = &t.tensor;
  }
  std::map<std::string, std::string> foreign_by_name;
  for (const auto& [name, dtype] : foreign) {
    if (is_batch_counter(name)) report.ignored.push_back(name);
    else foreign_by_name[name] = dtype;
  }
  std::vector<std::pair<NamedTensor, const Tensor*>> to_copy;
  std::map<std::string, bool> seen;
  for (NamedTensor& slot : model.state()) {
    seen[slot.name] = true;
    const std::string model_side = "model " + shape_str(slot.tensor.shape()) + " F32";
    if (auto f = foreign_by_name.find(slot.name); f != foreign_by_name.end()) {
      report.mismatched.push_back(slot.name + ": file " + f->second + ", " + model_side);
      continue;
    }
    auto it = by_name.find(slot.name);
    if (it == by_name.end()) {
      report.missing.push_back(slot.name);
      continue;
    }
    const Tensor& src = *it->second;
    if (src.shape() != slot.tensor.shape() || src.dtype() != DType::f32) {
      const std::string what = slot.name + ": file " + shape_str(src.shape()) + " " +
                               std::string(dtype_name(src.dtype())) + ", " + model_side;
      const bool classifier = !resized_classifier.empty() && slot.name.rfind(resized_classifier + ".", 0) == 0 &&
                              slot.name.find('.', resized_classifier.size() + 1) == std::string::npos &&
                              src.dtype() == DType::f32;
      (classifier ? report.classifier : report.mismatched).push_back(what);
      continue;
    }
    to_copy.emplace_back(slot, &src);
    report.loaded.push_back(slot.name);
  }
  for (const NamedTensor& t : tensors) {
    if (seen.count(t.name) || is_batch_counter(t.name)) continue;
    (is_optimizer_state(t.name) ? report.ignored : report.unexpected).push_back(t.name);
  }
  for (const auto& [name, dtype] : foreign)
    if (!seen.count(name) && !is_batch_counter(name)) report.unexpected.push_back(name);
  if (strict && !report.strict_ok()) {
    std::string why;
    if (!report.missing.empty()) why += "; missing: " + list(report.missing);
    if (!report.unexpected.empty()) why += "; unexpected: " + list(report.unexpected);
    if (!report.mismatched.empty()) why += "; mis-shaped: " + list(report.mismatched);
    throw InputError(source + ": does not match model '" + model.name() + "' (strict loading)" + why);
  }
  for (auto& [slot, src] : to_copy) slot.tensor.copy_from(*src);  // slot shares the layer's storage
  return report;
}

}  // namespace convoy
