#pragma once
// Loading another model's weights into a model by state-dict name, as PyTorch's
// load_state_dict(strict=...) does: for fine-tuning from a torchvision state dict or any
// Convoy checkpoint (`convoy train --init-weights`).
#include <string>
#include <utility>
#include <vector>

#include "engine/core/named_tensor.h"
#include "engine/graph/model.h"

namespace convoy {

struct WeightsLoadReport {
  std::vector<std::string> loaded;      // copied into the model
  std::vector<std::string> missing;     // the model's, absent from the file: left as initialized
  std::vector<std::string> unexpected;  // the file's, not in the model: ignored
  std::vector<std::string> mismatched;  // same name, another shape or dtype: "name: file (..) F32, model (..)"
  std::vector<std::string> classifier;  // mismatched tensors of the resized classifier (new num_classes)
  std::vector<std::string> ignored;     // PyTorch's num_batches_tracked (Convoy keeps no such counter),
                                        // a Convoy checkpoint's optimizer state ("optim.*")
  // Strict: nothing missing, unexpected or mismatched (the resized classifier excepted).
  bool strict_ok() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
  // The report as lines, "loaded 62 of 62 tensors from F" then one line per kind of problem.
  std::string str(const std::string& source) const;
};

// Copies every tensor of `tensors` whose name and shape match one of the model's (parameters
// and batch-norm statistics) into it. `foreign` are the file's tensors of a dtype Convoy has
// none for ({name, dtype}); `*.num_batches_tracked` among them or among `tensors`, and a Convoy
// checkpoint's optimizer state (`optim.*`), are ignored and counted in the report. When `resized_classifier` names a layer (the run changed num_classes), that
// layer's mismatched tensors stay freshly initialized and are reported apart. With `strict`,
// anything missing, unexpected or mismatched is an InputError naming the file and the tensors,
// and nothing is loaded.
WeightsLoadReport load_matching_weights(Model& model, const std::vector<NamedTensor>& tensors,
                                        const std::vector<std::pair<std::string, std::string>>& foreign,
                                        const std::string& resized_classifier, bool strict,
                                        const std::string& source);

}  // namespace convoy
