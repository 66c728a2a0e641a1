#include "engine/train/evaluate.h"

#include <algorithm>

#include "engine/core/error.h"

namespace convoy {

NormalizeAugment make_normalize(const std::vector<double>& mean, const std::vector<double>& std) {
  NormalizeAugment n;
  CONVOY_CHECK(mean.size() == std.size() && mean.size() <= 4, "mean/std per channel");
  for (size_t c = 0; c < 4; ++c) {  // one value serves every channel
    const size_t from = mean.size() == 1 ? 0 : c;
    if (from >= mean.size()) break;
    n.mean[c] = static_cast<float>(mean[from]);
    n.std[c] = static_cast<float>(std[from]);
  }
  return n;
}

namespace {

Tensor normalized_input(Model& model, Backend& backend, const Tensor& images,
                        const NormalizeAugment& normalize) {
  const Tensor device_images = backend.upload(images);
  Tensor x = backend.empty(images.shape(), model.compute_dtype(), model.layout());  // (N, C, H, W)
  backend.ops().normalize_augment(device_images, normalize, 0, x);
  return x;
}

// The logits of x: through an inference plan where one applies, else the layers one by one.
Tensor eval_logits(Model& model, Backend& backend, const Tensor& x, InferencePlans* plans) {
  if (plans && backend.device().is_cpu() && x.dtype() == DType::f32 && x.layout() == Layout::nchw)
    if (const Tensor* logits = plans->run(model, x)) return *logits;
  return model.forward(backend, x, StepInfo{});
}

}  // namespace

LoaderOptions eval_loader_options(const Preprocess& preprocess, int64_t batch_size, int64_t workers) {
  LoaderOptions o;
  o.batch_size = batch_size;
  o.shuffle = false;
  o.drop_last = false;
  o.mode = SampleMode::eval;
  o.preprocess = preprocess;
  o.workers = workers;
  return o;
}

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

std::vector<float> predict_probabilities(Model& model, Backend& backend, const Tensor& images,
                                         const NormalizeAugment& normalize, InferencePlans* plans) {
  const Tensor x = normalized_input(model, backend, images, normalize);
  const Tensor logits = eval_logits(model, backend, x, plans);
  Tensor probs = backend.empty(logits.shape(), DType::f32);
  backend.ops().softmax(logits, probs);
  return probs.to_floats();
}

}  // namespace convoy
