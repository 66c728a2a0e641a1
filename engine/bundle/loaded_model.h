#pragma once
// A checkpoint loaded for inference (`convoy infer`, `convoy quantize`): the model on a backend
// in f32 and what its metadata says about classes, normalization and preprocessing.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "datasets/preprocess.h"
#include "engine/backends/backend.h"
#include "engine/graph/model.h"
#include "engine/inference/inference_plan.h"
#include "engine/ops/normalize_augment.h"

namespace convoy {

struct LoadedModel {
  Model model;
  std::vector<std::string> class_names;
  NormalizeAugment normalize;
  Preprocess preprocess;  // the checkpoint's evaluation preprocessing
  std::map<std::string, double> int8_activation_max;  // an int8 checkpoint's ranges, else empty
  // An 8-bit checkpoint's calibration: the device ("cpu", "cuda") and type ("int8", "fp8") it was for.
  std::string quantized_for, quantized_type;
  InferenceOptions plan_precision;  // what `convoy infer` chose: precision, int8 ranges, the tunables
  Precision trained_precision = Precision::fp32;  // the checkpoint's training precision
  // On a GPU in int8 or fp8: the 8-bit plan's steps (GraphedBatches runs them), else null.
  std::shared_ptr<const EightBitGraph> eight_bit;
};

// Reads `path` (CheckpointUse::inference) and builds its model on `backend`, with `fusion` as
// Model::set_fusion; bad metadata is an InputError naming the file and key.
LoadedModel load_model(const std::string& path, Backend& backend, bool fusion);

}  // namespace convoy
