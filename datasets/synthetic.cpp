// Synthetic data: random pixels and labels generated on every load from (seed, index), so a
// dataset of any size costs no memory and reads the same in every worker and every run.
#include <limits>
#include <vector>

#include "datasets/dataset.h"
#include "engine/core/counter_rng.h"
#include "engine/core/error.h"

namespace convoy {
namespace {

// Separate streams for labels and pixels, so neither is a function of the other.
constexpr uint64_t kLabelStream = 0x4C4142454Cull;  // "LABEL"
constexpr uint64_t kPixelStream = 0x504958454Cull;  // "PIXEL"

class SyntheticDataset : public Dataset {
 public:
  SyntheticDataset(Shape shape, int64_t classes, int64_t size, uint64_t seed)
      : Dataset("synthetic", digit_names(classes)),
        shape_(std::move(shape)),
        classes_(classes),
        size_(size),
        label_seed_(counter_hash(seed, kLabelStream)),
        pixel_seed_(counter_hash(seed, kPixelStream)) {}

  int64_t size() const override { return size_; }
  int32_t label(int64_t index) const override {
    return static_cast<int32_t>(counter_hash(label_seed_, static_cast<uint64_t>(index)) %
                                static_cast<uint64_t>(classes_));
  }
  std::optional<Shape> stored_shape() const override { return shape_; }

  // Made at the model's input size whatever the crops and resizing say: resampling random
  // pixels would measure the CPU's resampler, and a benchmark on synthetic data wants the
  // engine alone (the loader has its own measure, `convoy train --data-only`).
  void load(int64_t index, const Preprocess& p, SampleMode, uint64_t, uint8_t* out) const override {
    generate(index, static_cast<size_t>(p.channels * p.height * p.width), out);
  }

 private:
  static std::vector<std::string> digit_names(int64_t classes) {
    std::vector<std::string> names;
    names.reserve(static_cast<size_t>(classes));
    for (int64_t i = 0; i < classes; ++i) names.push_back(std::to_string(i));
    return names;
  }

  // Sample `index`'s n u8 pixels, eight bytes from each hash.
  void generate(int64_t index, size_t n, uint8_t* out) const {
    const uint64_t sample_seed = counter_hash(pixel_seed_, static_cast<uint64_t>(index));
    for (size_t i = 0; i < n; i += 8) {
      const uint64_t bits = counter_hash(sample_seed, i / 8);
      // Low byte first, by shifts: the same pixels on any host byte order.
      for (size_t k = 0; k < 8 && i + k < n; ++k) out[i + k] = static_cast<uint8_t>(bits >> (8 * k));
    }
  }

  Shape shape_;  // (C, H, W)
  int64_t classes_;
  int64_t size_;
  uint64_t label_seed_;
  uint64_t pixel_seed_;
};

}  // namespace

std::unique_ptr<Dataset> make_synthetic(Shape shape, int64_t classes, int64_t size, uint64_t seed) {
  if (shape.size() != 3) throw InputError("synthetic: shape must be (C, H, W), got " + shape_str(shape));
  if (shape[0] != 1 && shape[0] != 3)
    throw InputError("synthetic: channels must be 1 or 3, got " + std::to_string(shape[0]));
  if (shape[1] <= 0 || shape[2] <= 0)
    throw InputError("synthetic: height and width must be positive, got " + shape_str(shape));
  if (classes <= 0 || classes > std::numeric_limits<int32_t>::max())
    throw InputError("synthetic: classes must be positive (and fit in 32 bits), got " +
                     std::to_string(classes));
  if (size <= 0) throw InputError("synthetic: size must be positive, got " + std::to_string(size));
  return std::make_unique<SyntheticDataset>(std::move(shape), classes, size, seed);
}

}  // namespace convoy
