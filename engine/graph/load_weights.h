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
  std::string stripped_prefix;  // a wrapper's prefix on every name of the file ("module."), removed
  std::vector<std::pair<std::string, std::string>> converted;  // loaded from F16 or BF16: {name, "F16"}
  // Strict: nothing missing, unexpected or mismatched (the resized classifier excepted).
  bool strict_ok() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
  // The report as lines, "loaded 62 of 62 tensors from F" then one line per kind of problem.
  std::string str(const std::string& source) const;
};

// Copies every tensor of `tensors` whose name and shape match one of the model's (parameters
// and batch-norm statistics) into it; F16 and BF16 tensors are converted to the model's F32 (exactly:
// every F16 and BF16 value is an F32 value) and listed in `converted`. When every name of the file
// starts with the same leading components ("module.", as torch's DataParallel saves them; "model.")
// and the names without them match more of the model's, they are stripped (`stripped_prefix`).
// `foreign` are the file's tensors of a dtype Convoy has none for ({name, dtype});
// `*.num_batches_tracked` among them or among `tensors`, and a Convoy checkpoint's optimizer state
// (`optim.*`), are ignored and counted in the report. When `resized_classifier` names a layer (the
// run changed num_classes), that layer's mismatched tensors stay freshly initialized and are
// reported apart. With `strict`, anything missing, unexpected or mismatched is an InputError
// naming the file and the tensors, and nothing is loaded. Without it, a file of which no tensor
// loads is an InputError too (naming a few of the file's names and of the model's): a run that
// silently starts from scratch is never what was asked for.
WeightsLoadReport load_matching_weights(Model& model, const std::vector<NamedTensor>& tensors,
                                        const std::vector<std::pair<std::string, std::string>>& foreign,
                                        const std::string& resized_classifier, bool strict,
                                        const std::string& source);

}  // namespace convoy
