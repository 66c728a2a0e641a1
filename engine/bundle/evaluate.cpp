#include "engine/bundle/evaluate.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "engine/core/error.h"

namespace convoy {

EvalResult evaluate(Model& model, Backend& backend, DataLoader& loader, const NormalizeAugment& normalize,
                    InferencePlans* plans) {
  const int64_t classes = model.num_classes();
  EvalResult r;
  r.confusion.assign(static_cast<size_t>(classes * classes), 0);
  double loss_sum = 0;
  int64_t correct = 0;
  loader.start_epoch(0);
  Batch batch;
  while (loader.next(batch)) {
    const int64_t count = batch.labels.dim(0);
    if (count == 0) continue;  // every sample of it unreadable and skipped
    const Tensor x = normalized_input(model, backend, batch.images, normalize);
    const Tensor labels = backend.upload(batch.labels);
    const Tensor logits = eval_logits(model, backend, x, plans);
    Tensor loss = backend.empty({1}, DType::f32), hits = backend.empty({1}, DType::i32), no_grad;
    backend.ops().softmax_cross_entropy(logits, labels, 0.0f, loss, no_grad, hits);
    const std::vector<float> scores = logits.to_floats();  // (B, classes)
    loss_sum += static_cast<double>(loss.to_floats()[0]) * static_cast<double>(count);
    const int32_t* truth = batch.labels.data<int32_t>();
    for (int64_t i = 0; i < count; ++i) {
      const float* row = scores.data() + i * classes;
      int32_t best = 0;
      for (int32_t c = 1; c < classes; ++c)
        if (row[c] > row[best]) best = c;
      r.predictions.push_back(best);
      r.confusion[static_cast<size_t>(truth[i] * classes + best)]++;
      correct += best == truth[i];
    }
    r.samples += count;
  }
  r.skipped = loader.stats().skipped;
  const auto n = static_cast<double>(r.samples);
  r.loss = r.samples ? loss_sum / n : 0;
  r.accuracy = r.samples ? static_cast<double>(correct) / n : 0;
  return r;
}

EvalResult evaluate(GraphedBatches& graphed, int64_t classes, DataLoader& loader) {
  EvalResult r;
  r.confusion.assign(static_cast<size_t>(classes * classes), 0);
  double loss_sum = 0;
  int64_t correct = 0;
  struct Running {
    GraphedBatches::Pending pending;
    Tensor labels;
  };
  std::optional<Running> running;
  std::vector<float> logits, probs;
  auto score = [&](Running& done) {
    graphed.finish(done.pending, logits, probs);
    const int32_t* truth = done.labels.data<int32_t>();
    for (int64_t i = 0; i < done.labels.dim(0); ++i) {
      const float* row = logits.data() + i * classes;
      const auto best = static_cast<int32_t>(std::max_element(row, row + classes) - row);
      r.predictions.push_back(best);
      r.confusion[static_cast<size_t>(truth[i] * classes + best)]++;
      correct += best == truth[i];
      // Cross-entropy from the device's softmax (no label smoothing), as the training's evaluation.
      loss_sum -= std::log(std::max(probs[static_cast<size_t>(i * classes + truth[i])], 1e-30f));
    }
    r.samples += done.labels.dim(0);
  };
  loader.start_epoch(0);
  Batch batch;
  while (loader.next(batch)) {
    if (batch.labels.dim(0) == 0) continue;  // every sample of it unreadable and skipped
    Running next{graphed.submit(batch.images), batch.labels};
    if (running) score(*running);
    running = std::move(next);
  }
  if (running) score(*running);
  r.skipped = loader.stats().skipped;
  const auto n = static_cast<double>(r.samples);
  r.loss = r.samples ? loss_sum / n : 0;
  r.accuracy = r.samples ? static_cast<double>(correct) / n : 0;
  return r;
}

}  // namespace convoy
