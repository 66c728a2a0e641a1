#pragma once
// A model in evaluation mode: its input from a u8 image batch, its logits and class
// probabilities, and the loader that feeds it a dataset as training evaluated it. Shared by
// evaluation on a dataset (evaluate.h, for training and `convoy infer --data`) and the inference commands.
#include <cstdint>
#include <vector>

#include "datasets/loader.h"
#include "datasets/preprocess.h"
#include "engine/backends/backend.h"
#include "engine/graph/model.h"
#include "engine/inference/plan_cache.h"
#include "engine/ops/normalize_augment.h"

namespace convoy {

// A loader that serves `data` whole, in order, as the model's input in eval mode.
LoaderOptions eval_loader_options(const Preprocess& preprocess, int64_t batch_size, int64_t workers);

// A u8 batch (N, C, H, W) on the host, normalized into the model's dtype and layout on `backend`.
Tensor normalized_input(Model& model, Backend& backend, const Tensor& images, const NormalizeAugment& normalize);

// The logits (N, classes) of x: through an inference plan where one applies (with `plans`, a CPU
// f32 nchw input), else the layers one by one.
Tensor eval_logits(Model& model, Backend& backend, const Tensor& x, InferencePlans* plans);

// A batch's logits and their softmax, each (N, classes) row-major on the host.
struct Predictions {
  std::vector<float> logits;         // (N, classes)
  std::vector<float> probabilities;  // (N, classes)
};

// The logits and softmax probabilities for a u8 batch (N, C, H, W) on the CPU.
Predictions predict(Model& model, Backend& backend, const Tensor& images, const NormalizeAugment& normalize,
                    InferencePlans* plans = nullptr);

// Softmax probabilities (N, classes) for a u8 batch (N, C, H, W) on the CPU.
std::vector<float> predict_probabilities(Model& model, Backend& backend, const Tensor& images,
                                         const NormalizeAugment& normalize, InferencePlans* plans = nullptr);

}  // namespace convoy
