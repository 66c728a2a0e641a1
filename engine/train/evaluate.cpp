#include "engine/train/evaluate.h"

#include "engine/core/error.h"

namespace convoy {

NormalizeAugment make_normalize(const std::vector<double>& mean, const std::vector<double>& std) {
  NormalizeAugment n;
  CONVOY_CHECK(mean.size() == std.size() && mean.size() <= 4, "mean/std per channel");
  for (size_t c = 0; c < mean.size(); ++c) {
    n.mean[c] = static_cast<float>(mean[c]);
    n.std[c] = static_cast<float>(std[c]);
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

}  // namespace

EvalResult evaluate(Model& model, Backend& backend, const Dataset& data, int64_t batch_size,
                    const NormalizeAugment& normalize) {
  const int64_t n = data.images.dim(0);
  const int64_t classes = model.num_classes();
  EvalResult r;
  r.samples = n;
  r.confusion.assign(static_cast<size_t>(classes * classes), 0);
  r.predictions.resize(static_cast<size_t>(n));
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t begin = 0; begin < n; begin += batch_size) {
    const int64_t end = std::min(n, begin + batch_size);
    const Tensor x = normalized_input(model, backend, data.images.slice_rows(begin, end), normalize);
    const Tensor labels = backend.upload(data.labels.slice_rows(begin, end));
    const Tensor logits = model.forward(backend, x, StepInfo{});
    Tensor loss = backend.empty({1}, DType::f32), hits = backend.empty({1}, DType::i32), no_grad;
    backend.ops().softmax_cross_entropy(logits, labels, 0.0f, loss, no_grad, hits);
    const std::vector<float> scores = logits.to_floats();  // (B, classes)
    loss_sum += static_cast<double>(loss.to_floats()[0]) * static_cast<double>(end - begin);
    const int32_t* truth = data.labels.data<int32_t>();
    for (int64_t i = begin; i < end; ++i) {
      const float* row = scores.data() + (i - begin) * classes;
      int32_t best = 0;
      for (int32_t c = 1; c < classes; ++c)
        if (row[c] > row[best]) best = c;
      r.predictions[static_cast<size_t>(i)] = best;
      r.confusion[static_cast<size_t>(truth[i] * classes + best)]++;
      correct += best == truth[i];
    }
  }
  r.loss = n ? loss_sum / static_cast<double>(n) : 0;
  r.accuracy = n ? static_cast<double>(correct) / static_cast<double>(n) : 0;
  return r;
}

std::vector<float> predict_probabilities(Model& model, Backend& backend, const Tensor& images,
                                         const NormalizeAugment& normalize) {
  const Tensor x = normalized_input(model, backend, images, normalize);
  const Tensor logits = model.forward(backend, x, StepInfo{});
  Tensor probs = backend.empty(logits.shape(), DType::f32);
  backend.ops().softmax(logits, probs);
  return probs.to_floats();
}

}  // namespace convoy
