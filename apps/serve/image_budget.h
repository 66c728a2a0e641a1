#pragma once
// A request's encoded images (classify's body, a BYTES input) held to a pixel and byte budget
// read from their headers before any pixel is decoded: a PNG of 16384 x 16383 RGBA16 is 2 MB on
// the wire and 2 GB once inflated.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "apps/serve/metrics.h"
#include "engine/core/tensor.h"

namespace convoy::serve {

class ServedVersion;  // apps/serve/served_model.h; declared only, so that image_cost.cpp's part
                      // (the cost and the check) builds without the engine's inference headers

struct ImageBudget {
  // A request's images together. 40 MP takes a 4K frame (8.3 MP) four times over, or 32 photos
  // of 1.2 MP; 160 MB is that many 8-bit RGBA pixels, so a 16-bit RGBA image gets half of them.
  int64_t max_pixels = 40'000'000;
  int64_t max_bytes = 160'000'000;
};

// What decoding an image costs by its header: its pixels, and its samples at their stored depth
// (16-bit PNG at two bytes a sample, alpha and palette expansion counted; JPEG at 3 bytes a
// pixel). Zero for what has no readable JPEG or PNG header: the decoder refuses it, naming why.
struct ImageCost {
  int64_t pixels = 0;
  int64_t bytes = 0;
};
ImageCost image_cost(std::string_view encoded);
ImageCost image_cost(const std::vector<std::string>& encoded);  // their sum

// RequestError(413) naming the totals and the flag when `count` images costing `total` together
// are over `budget`; the second form sums the costs of `encoded`.
void check_image_budget(ImageCost total, size_t count, const ImageBudget& budget);
void check_image_budget(const std::vector<std::string>& encoded, const ImageBudget& budget);
// As check_image_budget, a refusal counted in `metrics` (the server's: the model never sees it).
void admit_image_cost(ImageCost total, size_t count, const ImageBudget& budget, ServerMetrics& metrics);

// Admits a request's encoded images for `served`: checked against `budget` (admit_image_cost); on
// the CPU also decoded and preprocessed here, on the calling thread (an HTTP worker, gRPC's), into
// (n, C, H, W) u8 `input`, `encoded` emptied, rather than on the one thread that runs every CPU
// model's batches. A GPU version keeps them for its instance's batched nvJPEG decoding.
// RequestError(400) naming an element that cannot be decoded.
void admit_images(const ServedVersion& served, std::vector<std::string>& encoded, Tensor& input,
                  const ImageBudget& budget, MetricsRegistry& metrics);

}  // namespace convoy::serve
