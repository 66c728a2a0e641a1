#include "apps/serve/image_budget.h"

#include <span>

#include "apps/serve/kserve_json.h"
#include "datasets/image_codec.h"
#include "datasets/preprocess.h"
#include "engine/core/error.h"

namespace convoy::serve {

namespace {

std::span<const uint8_t> as_bytes(std::string_view s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

// Samples per pixel and bytes per sample as libpng inflates them, from IHDR's bit depth
// (byte 24) and colour type (byte 25), before our decoder reduces them to 8-bit gray or RGB.
int64_t png_bytes_per_pixel(std::string_view png) {
  const auto depth = static_cast<uint8_t>(png[24]), color = static_cast<uint8_t>(png[25]);
  const int64_t sample = depth == 16 ? 2 : 1;
  switch (color) {
    case 0:
      return sample;  // gray
    case 2:
      return 3 * sample;  // RGB
    case 3:
      return 4;  // palette: expanded to RGB, with alpha where it has tRNS
    case 4:
      return 2 * sample;  // gray + alpha
    default:
      return 4 * sample;  // RGBA
  }
}

std::string millions(int64_t n) {
  const int64_t tenths = (n + 50'000) / 100'000;
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " million ";
}

}  // namespace

ImageCost image_cost(std::string_view encoded) {
  ImageHeader h;
  try {
    h = read_image_header(as_bytes(encoded), "image");
  } catch (const InputError&) {
    return {};
  }
  ImageCost c;
  c.pixels = h.width * h.height;
  c.bytes = c.pixels * (h.format == ImageFormat::png ? png_bytes_per_pixel(encoded) : 3);
  return c;
}

namespace {
ImageCost total_cost(const std::vector<std::string>& encoded) {
  ImageCost total;
  for (const std::string& e : encoded) {
    const ImageCost c = image_cost(e);
    total.pixels += c.pixels;
    total.bytes += c.bytes;
  }
  return total;
}
}  // namespace

void check_image_budget(ImageCost total, size_t count, const ImageBudget& budget) {
  const std::string what = count == 1 ? "the image" : "the request's " + std::to_string(count) + " images";
  if (total.pixels > budget.max_pixels)
    throw RequestError(413, what + " would decode to " + millions(total.pixels) + "pixels, over the budget of " +
                                millions(budget.max_pixels) + "pixels a request (--max-image-pixels)");
  if (total.bytes > budget.max_bytes)
    throw RequestError(413, what + " would decode to " + millions(total.bytes) + "bytes, over the budget of " +
                                millions(budget.max_bytes) + "bytes a request (--max-image-bytes)");
}

void check_image_budget(const std::vector<std::string>& encoded, const ImageBudget& budget) {
  check_image_budget(total_cost(encoded), encoded.size(), budget);
}

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
  admit_image_cost(total_cost(encoded), encoded.size(), budget, metrics.server());
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
