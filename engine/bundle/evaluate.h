#pragma once
// Evaluation of a model on a dataset: loss, accuracy, confusion matrix, predictions.
#include <cstdint>
#include <vector>

#include "datasets/loader.h"
#include "engine/backends/backend.h"
#include "engine/bundle/predict.h"
#include "engine/graph/model.h"
#include "engine/inference/graphed_batches.h"
#include "engine/inference/plan_cache.h"

namespace convoy {

struct EvalResult {
  int64_t samples = 0;  // evaluated
  int64_t skipped = 0;  // unreadable, left out (on_bad_image: skip)
  double loss = 0;      // mean cross-entropy (no label smoothing)
  double accuracy = 0;  // top-1, in [0, 1]
  std::vector<int64_t> confusion;  // (classes, classes): row = true class, column = predicted
  std::vector<int32_t> predictions;  // top-1 class per sample
};

// Runs the model in evaluation mode over one epoch of `loader` (eval mode, not shuffled):
// predictions come in the dataset's order, less any samples the loader skipped. With `plans`, a
// CPU f32 model runs through its inference plans (engine/inference) instead of Model::forward.
EvalResult evaluate(Model& model, Backend& backend, DataLoader& loader, const NormalizeAugment& normalize,
                    InferencePlans* plans = nullptr);
// The same through a GPU's inference path (the model GraphedBatches runs, its normalization; the
// loader's batches at most its largest size), the next batch queued while the last one runs.
EvalResult evaluate(GraphedBatches& graphed, int64_t classes, DataLoader& loader);

}  // namespace convoy
