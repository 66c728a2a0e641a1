#include "engine/inference/graphed_batches.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/inference/batched_plans.h"

namespace convoy {

GraphedBatches::GraphedBatches(Backend& backend, Model& model, int64_t max_batch, const NormalizeAugment& normalize)
    : backend_(backend),
      model_(model),
      normalize_(normalize),
      sizes_(BatchedPlans::planned_sizes(max_batch)),
      uploader_(backend.make_batch_uploader()),
      forward_(backend, model) {
  const Shape& in = model.input_shape();  // (C, H, W)
  for (int64_t size : sizes_)
    inputs_.push_back(backend.zeros({size, in[0], in[1], in[2]}, model.compute_dtype(), model.layout()));
  record_every_size();
}

void GraphedBatches::record_every_size() {
  // A long-lived scratch buffer (cuDNN's workspace) that grows for one batch size moves, and every
  // recording made before then is stale (RecordedWork::valid): a server alternating between batch
  // sizes would record on every request. So each size is recorded here, the largest first, and
  // again until a round records nothing new; buffers only grow, so this ends within a few rounds.
  for (int round = 0; round < 4; ++round) {
    const int before = forward_.recordings();
    for (size_t k = sizes_.size(); k-- > 0;) forward_.run(inputs_[k], /*stable_input=*/true);
    if (!forward_.last_run_replayed() || (round > 0 && forward_.recordings() == before)) break;
  }
  backend_.synchronize();
}

GraphedBatches::~GraphedBatches() = default;

Tensor GraphedBatches::staging(int64_t n) {
  const Shape& in = model_.input_shape();
  return uploader_->host_empty({n, in[0], in[1], in[2]}, DType::u8);
}

void GraphedBatches::run(const Tensor& images, std::vector<float>& logits, std::vector<float>& probabilities) {
  const int64_t n = images.dim(0);
  CONVOY_CHECK(n >= 1 && n <= sizes_.back(), "GraphedBatches::run: batch out of range");
  const int64_t classes = model_.num_classes();
  logits.resize(static_cast<size_t>(n * classes));
  probabilities.resize(logits.size());
  int64_t row = 0;
  for (int64_t size : BatchedPlans::passes(n, sizes_)) {
    const int64_t rows = std::min(size, n - row);
    const size_t k = static_cast<size_t>(std::find(sizes_.begin(), sizes_.end(), size) - sizes_.begin());
    Tensor& x = inputs_[k];  // (size, C, H, W); a padded pass's last rows hold an earlier batch's
    const Tensor part = uploader_->upload(images.slice_rows(row, row + rows));
    Tensor rows_of_x = x.slice_rows(0, rows);
    if (part.dtype() == DType::u8)
      backend_.ops().normalize_augment(part, normalize_, 0, rows_of_x);
    else
      backend_.ops().cast(part, rows_of_x);  // f32 nchw values to the model's dtype and layout
    const Tensor out = forward_.run(x, /*stable_input=*/true);  // (size, classes)
    Tensor probs = backend_.empty(out.shape(), DType::f32);
    backend_.ops().softmax(out, probs);
    const std::vector<float> l = out.slice_rows(0, rows).to_floats();
    const std::vector<float> p = probs.slice_rows(0, rows).to_floats();
    std::copy(l.begin(), l.end(), logits.begin() + row * classes);
    std::copy(p.begin(), p.end(), probabilities.begin() + row * classes);
    row += rows;
  }
}

}  // namespace convoy
