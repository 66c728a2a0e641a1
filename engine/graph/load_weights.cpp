#include "engine/graph/load_weights.h"

#include <algorithm>
#include <map>
#include <set>
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

// A wrapper's prefix on every name of a file: torch's DataParallel and DistributedDataParallel
// save "module.conv1.weight", a model held as an attribute (Lightning, timm's EMA) "model.conv1.weight".
// The leading whole components that every name shares, cut where the rest matches the most of the
// model's names, if that is more than the names as they are match; else empty. (A model whose own
// names all start with "features." keeps them: stripping would match fewer.)
std::string prefix_to_strip(const std::vector<std::string>& names, const std::set<std::string>& model_names) {
  if (names.empty()) return "";
  std::string common = names.front();
  for (const std::string& name : names) {
    size_t same = 0;
    while (same < common.size() && same < name.size() && common[same] == name[same]) ++same;
    common.resize(same);
  }
  const auto matches = [&](size_t cut) {
    return std::count_if(names.begin(), names.end(),
                         [&](const std::string& name) { return model_names.count(name.substr(cut)) != 0; });
  };
  std::string best;
  auto best_matches = matches(0);
  for (size_t dot = common.find('.'); dot != std::string::npos; dot = common.find('.', dot + 1))
    if (const auto m = matches(dot + 1); m > best_matches) {
      best_matches = m;
      best = common.substr(0, dot + 1);
    }
  return best;
}

}  // namespace

std::string WeightsLoadReport::str(const std::string& source) const {
  std::ostringstream out;
  out << "init weights: loaded " << loaded.size() << " of " << loaded.size() + missing.size() + mismatched.size() + classifier.size()
      << " tensors of the model from " << source << "\n";
  if (!stripped_prefix.empty()) {
    out << "  stripped the prefix '" << stripped_prefix << "' that every name in the file has (torch's DataParallel "
        << "saves 'module.')";
    if (!loaded.empty()) out << ": '" << stripped_prefix << loaded.front() << "' loaded as '" << loaded.front() << "'";
    out << "\n";
  }
  std::map<std::string, size_t> by_dtype;
  for (const auto& [name, dtype] : converted) ++by_dtype[dtype];
  for (const auto& [dtype, count] : by_dtype)
    out << "  converted " << count << " " << dtype << " tensors to F32 (exactly: every " << dtype
        << " value is an F32 value)\n";
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
  std::vector<NamedTensor> slots = model.state();
  std::set<std::string> model_names;
  for (const NamedTensor& slot : slots) model_names.insert(slot.name);
  std::vector<std::string> file_names;
  for (const NamedTensor& t : tensors) file_names.push_back(t.name);
  for (const auto& [name, dtype] : foreign) file_names.push_back(name);
  report.stripped_prefix = prefix_to_strip(file_names, model_names);
  const size_t cut = report.stripped_prefix.size();  // every name is longer: the prefix ends before a component

  std::map<std::string, const Tensor*> by_name;
  for (const NamedTensor& t : tensors) {
    const std::string name = t.name.substr(cut);
    if (is_batch_counter(name)) report.ignored.push_back(name);
    else by_name[name] = &t.tensor;
  }
  std::map<std::string, std::string> foreign_by_name;
  for (const auto& [full_name, dtype] : foreign) {
    const std::string name = full_name.substr(cut);
    if (is_batch_counter(name)) report.ignored.push_back(name);
    else foreign_by_name[name] = dtype;
  }
  std::vector<std::pair<NamedTensor, Tensor>> to_copy;  // {the model's slot, what goes into it (F32, CPU)}
  for (NamedTensor& slot : slots) {
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
    const bool floating = src.dtype() == DType::f32 || src.dtype() == DType::f16 || src.dtype() == DType::bf16;
    if (src.shape() != slot.tensor.shape() || !floating) {
      const std::string what = slot.name + ": file " + shape_str(src.shape()) + " " +
                               std::string(dtype_name(src.dtype())) + ", " + model_side;
      const bool classifier = !resized_classifier.empty() && slot.name.rfind(resized_classifier + ".", 0) == 0 &&
                              slot.name.find('.', resized_classifier.size() + 1) == std::string::npos && floating;
      (classifier ? report.classifier : report.mismatched).push_back(what);
      continue;
    }
    if (src.dtype() == DType::f32) {
      to_copy.emplace_back(slot, src);
    } else {  // a half-precision export (model.half()): widened, which is exact
      to_copy.emplace_back(slot, Tensor::from_floats(src.to_floats(), src.shape()));
      report.converted.emplace_back(slot.name, std::string(dtype_name(src.dtype())));
    }
    report.loaded.push_back(slot.name);
  }
  for (const NamedTensor& t : tensors) {
    const std::string name = t.name.substr(cut);
    if (model_names.count(name) || is_batch_counter(name)) continue;
    (is_optimizer_state(name) ? report.ignored : report.unexpected).push_back(name);
  }
  for (const auto& [full_name, dtype] : foreign) {
    const std::string name = full_name.substr(cut);
    if (!model_names.count(name) && !is_batch_counter(name)) report.unexpected.push_back(name);
  }
  if (strict && !report.strict_ok()) {
    std::string why;
    if (!report.missing.empty()) why += "; missing: " + list(report.missing);
    if (!report.unexpected.empty()) why += "; unexpected: " + list(report.unexpected);
    if (!report.mismatched.empty()) why += "; mis-shaped: " + list(report.mismatched);
    throw InputError(source + ": does not match model '" + model.name() + "' (strict loading)" + why);
  }
  if (report.loaded.empty() && !slots.empty()) {
    const std::vector<std::string> model_list(model_names.begin(), model_names.end());
    std::string why = "; the model's tensors are " + list(model_list, 4);
    why += file_names.empty() ? "; the file holds no tensor" : "; the file's are " + list(file_names, 4);
    if (!report.mismatched.empty()) why += "; mis-shaped: " + list(report.mismatched, 4);
    throw InputError(source + ": no tensor matches model '" + model.name() + "' by name and shape (0 of " +
                     std::to_string(slots.size()) + " would load)" + why);
  }
  for (auto& [slot, src] : to_copy) slot.tensor.copy_from(src);  // slot shares the layer's storage
  return report;
}

}  // namespace convoy
