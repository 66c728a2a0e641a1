#include "apps/serve/image_budget.h"

#include <span>

#include "apps/serve/kserve_json.h"
#include "apps/serve/served_model.h"
#include "datasets/image_codec.h"
#include "datasets/preprocess.h"
#include "engine/core/error.h"

namespace convoy::serve {

namespace {

std::span<const uint8_t> as_bytes(std::string_view s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

}  // namespace

void admit_image_cost(ImageCost total, size_t count, const ImageBudget& budget, ServerMetrics& metrics) {
  try {
    check_image_budget(total, count, budget);
  } catch (const RequestError&) {
    metrics.image_budget_refused++;  // refused before the model, as a malformed request is
    throw;
  }
}

void admit_images(const ServedVersion& served, std::vector<std::string>& encoded, Tensor& input,
                  const ImageBudget& budget, MetricsRegistry& metrics) {
  if (encoded.empty()) return;
  admit_image_cost(image_cost(encoded), encoded.size(), budget, metrics.server());
  if (served.device() != "cpu") return;
  const Shape& shape = served.input_shape();  // (C, H, W)
  const auto n = static_cast<int64_t>(encoded.size());
  Tensor images = Tensor::empty({n, shape[0], shape[1], shape[2]}, DType::u8);  // (n, C, H, W)
  const auto sample = static_cast<size_t>(shape_numel(shape));
  const auto start = Clock::now();
  for (int64_t i = 0; i < n; ++i) {
    try {
      decode_preprocess(as_bytes(encoded[static_cast<size_t>(i)]), "input element " + std::to_string(i),
                        served.preprocess(), SampleMode::eval, 0, images.data<uint8_t>() + static_cast<size_t>(i) * sample);
    } catch (const InputError& e) {
      // Counted as the model's instance counted it when it decoded: a failed request, with its time.
      ModelMetrics& m = metrics.get(served.config().name, served.version());
      m.request_failure++;
      m.record_completion(false, ns_of(Clock::now() - start));
      throw RequestError(400, e.what());
    }
  }
  input = images;
  encoded.clear();
}

}  // namespace convoy::serve
