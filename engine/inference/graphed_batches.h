#pragma once
// GraphedBatches: GPU inference for every batch a server instance or `convoy infer` forms, up
// to max_batch, at the speed of the offline engine. The model is on the device in its inference
// dtype and layout (Model::to: weights converted once, batch norm and ReLUs fused as in
// training's evaluation pass); each batch size of BatchedPlans::planned_sizes (1, 2, 4, ... and
// max_batch) has its own recorded forward (a CUDA graph, all recorded up front); u8 images go up
// from pinned staging on a copy stream (BatchUploader), are normalized into the recording's
// input in one kernel, and the softmax runs on the device. A batch of another size runs as
// passes of those sizes, the last one padded (BatchedPlans::passes). Not for concurrent use: a
// server runs one per instance, each instance with its own backend and stream.
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/core/tensor.h"
#include "engine/graph/model.h"
#include "engine/inference/graphed_forward.h"
#include "engine/ops/normalize_augment.h"

namespace convoy {

class GraphedBatches {
 public:
  // `model` is already on `backend` (Model::to); both must outlive this object. `normalize`
  // turns u8 pixels into the model's input (the checkpoint's mean and std, no augmentation).
  GraphedBatches(Backend& backend, Model& model, int64_t max_batch, const NormalizeAugment& normalize);
  ~GraphedBatches();
  GraphedBatches(const GraphedBatches&) = delete;
  GraphedBatches& operator=(const GraphedBatches&) = delete;

  // Host memory for n u8 images (n, C, H, W) that run() uploads fastest (pinned on CUDA).
  Tensor staging(int64_t n);

  // Logits and probabilities, each (n, classes) row-major, of `images`: (n, C, H, W) u8 pixels
  // or f32 values that are the model's input as they are, on the host, 1 <= n <= max_batch.
  void run(const Tensor& images, std::vector<float>& logits, std::vector<float>& probabilities);

  const std::vector<int64_t>& sizes() const { return sizes_; }
  // Whether the last pass replayed a recording (false where the backend cannot record: then each
  // pass is a plain forward), and how many recordings were made in all (one per size, unless a
  // recording went stale and was made again).
  bool replaying() const { return forward_.last_run_replayed(); }
  int recordings() const { return forward_.recordings(); }

 private:
  void record_every_size();

  Backend& backend_;
  Model& model_;
  NormalizeAugment normalize_;
  std::vector<int64_t> sizes_;
  std::unique_ptr<BatchUploader> uploader_;
  GraphedForward forward_;
  std::vector<Tensor> inputs_;  // by sizes_: (size, C, H, W) in the model's dtype and layout
};

}  // namespace convoy
