#pragma once
// A checkpoint loaded for inference (`convoy infer`, `convoy quantize`): the model on a backend
// in f32 and what its metadata says about classes, normalization and preprocessing.
#include <map>
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
  InferenceOptions plan_precision;  // what `convoy infer` chose: precision, int8 ranges, the tunables
  Precision trained_precision = Precision::fp32;  // the checkpoint's training precision
};

// Reads `path` (CheckpointUse::inference) and builds its model on `backend`, with `fusion` as
// Model::set_fusion; bad metadata is an InputError naming the file and key.
LoadedModel load_model(const std::string& path, Backend& backend, bool fusion);

}  // namespace convoy
