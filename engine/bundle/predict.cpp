#include "engine/bundle/predict.h"

namespace convoy {

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

Predictions predict(Model& model, Backend& backend, const Tensor& images, const NormalizeAugment& normalize,
                    InferencePlans* plans) {
  const Tensor x = normalized_input(model, backend, images, normalize);
  const Tensor logits = eval_logits(model, backend, x, plans);
  Tensor probs = backend.empty(logits.shape(), DType::f32);
  backend.ops().softmax(logits, probs);
  return {logits.to_floats(), probs.to_floats()};
}

std::vector<float> predict_probabilities(Model& model, Backend& backend, const Tensor& images,
                                         const NormalizeAugment& normalize, InferencePlans* plans) {
  return predict(model, backend, images, normalize, plans).probabilities;
}

}  // namespace convoy
