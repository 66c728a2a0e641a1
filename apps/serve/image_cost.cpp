// image_budget.h's cost of encoded images and its check, apart from admitting them to a model
// (image_budget.cpp), so that they build with the datasets module alone (the classify fuzz target).
#include <span>

#include "apps/serve/image_budget.h"
#include "apps/serve/kserve_json.h"
#include "datasets/image_codec.h"
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

ImageCost image_cost(const std::vector<std::string>& encoded) {
  ImageCost total;
  for (const std::string& e : encoded) {
    const ImageCost c = image_cost(e);
    total.pixels += c.pixels;
    total.bytes += c.bytes;
  }
  return total;
}

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
  check_image_budget(image_cost(encoded), encoded.size(), budget);
}

}  // namespace convoy::serve
