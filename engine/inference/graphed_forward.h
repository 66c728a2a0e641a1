#pragma once
// Inference forward passes replayed from recorded device work (CUDA graphs), one recording
// per input shape: a batch-1 ResNet-50 is ~150 small launches whose host cost exceeds the
// GPU's work, and a replay is one launch. Where the backend cannot record (the CPU), run()
// is Model::forward.
#include <map>
#include <memory>
#include <tuple>

#include "engine/backends/backend.h"
#include "engine/graph/model.h"

namespace convoy {

class GraphedForward {
 public:
  // `backend` and `model` (already on the backend) must outlive this object.
  GraphedForward(Backend& backend, Model& model) : backend_(backend), model_(model) {}

  // model.forward(backend, x, evaluation) for x (N, C, H, W) on the backend's device. The
  // logits live in the recording's own buffer: read them before the next run().
  // A new shape, dtype or layout, changed weights (Model::weights_version) or a recording
  // whose buffers moved (RecordedWork::valid) is recorded anew, never replayed stale.
  // `stable_input`: x is a buffer the caller keeps, for this shape, at this address: the
  // recording reads it where it is instead of a copy of it (one pass over the input saved).
  Tensor run(const Tensor& x, bool stable_input = false);

  // How many recordings have been made (tests: a new shape makes one, the same shape none).
  int recordings() const { return recordings_; }
  // Whether the last run() replayed a recording (false on the CPU, or where recording failed).
  bool last_run_replayed() const { return last_replayed_; }

 private:
  struct Recording {
    Tensor input;   // the buffer the recording reads: run() copies x into it
    Tensor output;  // the buffer it writes the logits into
    std::unique_ptr<RecordedWork> work;
    uint64_t weights_version = 0;
  };
  using Key = std::tuple<Shape, DType, Layout>;

  Backend& backend_;
  Model& model_;
  std::map<Key, Recording> recordings_by_shape_;
  int recordings_ = 0;
  bool last_replayed_ = false;
  bool unsupported_ = false;  // the backend records nothing: plain forwards from now on
};

}  // namespace convoy
