#pragma once
// ServedVersion's execution instance, shared by served_model.cpp (building and running it) and
// served_inputs.cpp (a batch's input). Internal to apps/serve.
#include <future>
#include <memory>

#include "apps/serve/served_model.h"
#include "datasets/batch_decoder.h"
#include "engine/backends/backend.h"
#include "engine/graph/model.h"
#include "engine/inference/batched_plans.h"
#include "engine/inference/graphed_batches.h"
#include "engine/ops/normalize_augment.h"

namespace convoy::serve {

// An execution instance: a backend (its own stream) of its own. On the CPU, a model of its own
// and its inference plans for the batches the batcher forms (as `convoy infer` runs it), where
// every layer has one; on a GPU, one recorded forward per batch size (GraphedBatches), as
// `convoy bench` runs it, of the one model all the version's instances share: the weights are
// on the device once, each instance replays its own recordings on its own stream, and only the
// recording (a forward through the shared model) is done one instance at a time.
struct ServedVersion::Instance {
  std::unique_ptr<Backend> backend;
  std::shared_ptr<Model> model;
  std::unique_ptr<BatchedPlans> plans;      // built by the instance's own thread where planned_
  std::unique_ptr<GraphedBatches> graphed;  // on a GPU
  std::shared_ptr<BatchDecoder> decoder;     // nvJPEG on a GPU where it starts; else the CPU decodes
  NormalizeAugment normalize;
  std::promise<void> ready;  // the thread is taking jobs, or why it cannot
};

}  // namespace convoy::serve
