#include "engine/inference/graphed_batches.h"

#include <algorithm>
#include <iostream>

#include "engine/core/error.h"
#include "engine/inference/batched_plans.h"

namespace convoy {

GraphedBatches::GraphedBatches(Backend& backend, Model& model, int64_t max_batch, const NormalizeAugment& normalize,
                               const EightBitGraph* eight_bit)
    : backend_(backend),
      model_(model),
      normalize_(normalize),
      sizes_(BatchedPlans::planned_sizes(max_batch)),
      uploader_(backend.make_batch_uploader()),
      forward_(backend, model) {
  const Shape& in = model.input_shape();  // (C, H, W)
  if (eight_bit) {
    eight_bit_ = std::make_unique<EightBit>();
    for (int64_t size : sizes_) {
      eight_bit_->plans.push_back(backend.compile_8bit(*eight_bit, size));
      inputs_.push_back(eight_bit_->plans.back()->input());
      inputs_.back().zero_();
    }
    eight_bit_->recorded.resize(sizes_.size());
  } else {
    model.fold_batch_norms(backend);
    for (int64_t size : sizes_)
      inputs_.push_back(backend.zeros({size, in[0], in[1], in[2]}, model.compute_dtype(), model.layout()));
  }
  record_every_size();
}

const Tensor& GraphedBatches::run_eight_bit(size_t k) {
  EightBit& state = *eight_bit_;
  CompiledForward& plan = *state.plans[k];
  std::unique_ptr<RecordedWork>& recorded = state.recorded[k];
  state.replayed = false;
  if (state.unrecordable) return plan.run();
  if (!recorded || !recorded->valid()) {
    recorded.reset();
    plan.run();  // a plain pass first: scratch buffers of the bf16 steps' ops grow outside the recording
    try {
      recorded = backend_.record([&] { plan.run(); });
    } catch (const DeviceError& error) {
      std::cerr << "convoy: " << error.what() << "; running without CUDA graphs\n";
    }
    if (!recorded) {
      state.unrecordable = true;
      return plan.run();
    }
    ++state.recordings;
  }
  recorded->replay();
  state.replayed = true;
  return plan.output();
}

void GraphedBatches::record_every_size() {
  // A long-lived scratch buffer (cuDNN's workspace) that grows for one batch size moves, and every
  // recording made before then is stale (RecordedWork::valid): a server alternating between batch
  // sizes would record on every request. So each size is recorded here, the largest first, and
  // again until a round records nothing new; buffers only grow, so this ends within a few rounds.
  for (int round = 0; round < 4; ++round) {
    const int before = recordings();
    for (size_t k = sizes_.size(); k-- > 0;) {
      if (eight_bit_) run_eight_bit(k);
      else forward_.run(inputs_[k], /*stable_input=*/true);
    }
    if (!replaying() || (round > 0 && recordings() == before)) break;
  }
  backend_.synchronize();
}

GraphedBatches::~GraphedBatches() = default;

Tensor GraphedBatches::staging(int64_t n) {
  const Shape& in = model_.input_shape();
  return uploader_->host_empty({n, in[0], in[1], in[2]}, DType::u8);
}

GraphedBatches::Pending GraphedBatches::submit(const Tensor& images) {
  const int64_t n = images.dim(0);
  CONVOY_CHECK(n >= 1 && n <= sizes_.back(), "GraphedBatches::submit: batch out of range");
  Pending pending;
  pending.rows_ = n;
  int64_t row = 0;
  for (int64_t size : BatchedPlans::passes(n, sizes_)) {
    const int64_t rows = std::min(size, n - row);
    const size_t k = static_cast<size_t>(std::find(sizes_.begin(), sizes_.end(), size) - sizes_.begin());
    // (size, C, H, W): a padded pass's last rows hold an earlier batch's. The next batch writes
    // it only after this one's forward has read it: both are queued on the one stream.
    Tensor& x = inputs_[k];
    // The ring's buffer holds the bytes as sent: channels-last pixels keep their layout tag.
    const Tensor part = uploader_->upload(images.slice_rows(row, row + rows)).with_layout(images.layout());
    Tensor rows_of_x = x.slice_rows(0, rows);
    if (part.dtype() == DType::u8)
      backend_.ops().normalize_augment(part, normalize_, 0, rows_of_x);
    else
      backend_.ops().cast(part, rows_of_x);  // f32 nchw values to the model's dtype and layout
    // (size, classes), the recording's buffer
    const Tensor out = eight_bit_ ? run_eight_bit(k) : forward_.run(x, /*stable_input=*/true);
    if (!pending.logits_.defined()) {
      pending.logits_ = uploader_->host_empty({n, out.dim(1)}, out.dtype());
      pending.probabilities_ = uploader_->host_empty({n, out.dim(1)}, DType::f32);
    }
    Tensor probs = backend_.empty(out.shape(), DType::f32);
    backend_.ops().softmax(out, probs);
    // Copied back before the next pass or batch replays into the same buffer (stream order).
    Tensor logits_rows = pending.logits_.slice_rows(row, row + rows);
    Tensor probs_rows = pending.probabilities_.slice_rows(row, row + rows);
    pending.landed_.push_back(uploader_->download(out.slice_rows(0, rows), logits_rows));
    pending.landed_.push_back(uploader_->download(probs.slice_rows(0, rows), probs_rows));
    row += rows;
  }
  return pending;
}

void GraphedBatches::finish(Pending& pending, std::vector<float>& logits, std::vector<float>& probabilities) {
  CONVOY_CHECK(!pending.landed_.empty(), "GraphedBatches::finish: not a submitted batch");
  pending.landed_.back()->wait();  // the last copy queued: every earlier one has landed too
  logits = pending.logits_.to_floats();
  probabilities = pending.probabilities_.to_floats();
  pending.landed_.clear();
}

void GraphedBatches::run(const Tensor& images, std::vector<float>& logits, std::vector<float>& probabilities) {
  Pending pending = submit(images);
  finish(pending, logits, probabilities);
}

}  // namespace convoy
