#pragma once
// GraphedBatches: GPU inference for every batch a server instance or `convoy infer` forms, up
// to max_batch, at the speed of the offline engine. The model is on the device in its inference
// dtype and layout (Model::to: weights converted once), each batch norm folded into its
// convolution (Model::fold_batch_norms: convolution, bias, residual add and ReLU in one cuDNN
// kernel where cuDNN has one); each batch size of BatchedPlans::planned_sizes (1, 2, 4, ... and
// max_batch) has its own recorded forward (a CUDA graph, all recorded up front); u8 images go up
// from pinned staging on a copy stream (BatchUploader), are normalized into the recording's
// input in one kernel, and the softmax runs on the device. A batch of another size runs as
// passes of those sizes, the last one padded (BatchedPlans::passes). The results come back on
// the same stream (BatchUploader::download), so one batch may be queued while another runs. Not
// for concurrent use: a server runs one per instance, each with its own backend and stream.
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
  // `model` is already on `backend` (Model::to), and is folded for inference here (no training
  // until its next to()); both must outlive this object. `normalize`
  // turns u8 pixels into the model's input (the checkpoint's mean and std, no augmentation).
  // With `eight_bit` (a GPU's 8-bit plan of the model, eight_bit_graph.h): each size runs that
  // plan (Backend::compile_8bit), recorded the same way, instead of the model's forward; the
  // model's input is then bf16 channels-last.
  GraphedBatches(Backend& backend, Model& model, int64_t max_batch, const NormalizeAugment& normalize,
                 const EightBitGraph* eight_bit = nullptr);
  ~GraphedBatches();
  GraphedBatches(const GraphedBatches&) = delete;
  GraphedBatches& operator=(const GraphedBatches&) = delete;

  // Host memory for n u8 images (n, C, H, W) that run() uploads fastest (pinned on CUDA), and
  // the same for any shape (a data loader's batches). Thread-safe.
  Tensor staging(int64_t n);
  Tensor host_empty(Shape shape, DType dtype) { return uploader_->host_empty(std::move(shape), dtype); }

  // A batch queued by submit(): its logits and probabilities come back to pinned host memory
  // behind its device work. Hand it to finish(); dropping it waits for the device.
  class Pending {
   public:
    int64_t rows() const { return rows_; }

   private:
    friend class GraphedBatches;
    int64_t rows_ = 0;
    Tensor logits_, probabilities_;  // (rows, classes) on the host, in the outputs' dtypes
    std::vector<std::unique_ptr<BatchUploader::Download>> landed_;  // each pass's copies, in order
  };

  // Queues the forward of `images` ((n, C, H, W) u8 pixels, or f32 values that are the model's
  // input as they are, on the host or already on this device, 1 <= n <= max_batch) and returns
  // without waiting for the device, so the caller prepares the next batch while this one runs
  // (two batches in flight: the device never waits for the host between them). Batches run in
  // the order submitted.
  Pending submit(const Tensor& images);
  // Waits for a submitted batch: logits and probabilities, each (n, classes) row-major.
  void finish(Pending& pending, std::vector<float>& logits, std::vector<float>& probabilities);
  // submit() and finish() in one.
  void run(const Tensor& images, std::vector<float>& logits, std::vector<float>& probabilities);

  const std::vector<int64_t>& sizes() const { return sizes_; }
  // Whether the last pass replayed a recording (false where the backend cannot record: then each
  // pass is a plain forward), and how many recordings were made in all (one per size, unless a
  // recording went stale and was made again).
  bool replaying() const { return eight_bit_ ? eight_bit_->replayed : forward_.last_run_replayed(); }
  int recordings() const { return eight_bit_ ? eight_bit_->recordings : forward_.recordings(); }
  // The 8-bit plan of the largest size (what runs in 8 bits and what in bf16), or null.
  const CompiledForward* eight_bit_plan() const { return eight_bit_ ? eight_bit_->plans.back().get() : nullptr; }

 private:
  void record_every_size();
  // The 8-bit plans, one per size, and their recordings.
  struct EightBit {
    std::vector<std::unique_ptr<CompiledForward>> plans;  // by sizes_
    std::vector<std::unique_ptr<RecordedWork>> recorded;  // null: not recorded (yet, or not on this backend)
    int recordings = 0;
    bool replayed = false;
    bool unrecordable = false;
  };
  // Queues size k's 8-bit plan: its recording replayed, made again where stale.
  const Tensor& run_eight_bit(size_t k);

  Backend& backend_;
  Model& model_;
  NormalizeAugment normalize_;
  std::vector<int64_t> sizes_;
  std::unique_ptr<BatchUploader> uploader_;
  GraphedForward forward_;
  std::vector<Tensor> inputs_;  // by sizes_: (size, C, H, W) in the model's dtype and layout (8-bit: the plans')
  std::unique_ptr<EightBit> eight_bit_;
};

}  // namespace convoy
