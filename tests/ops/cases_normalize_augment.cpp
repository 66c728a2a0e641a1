// Input normalization with the random crop and flip (ops.h gives the recipe): padding and
// flipping each on and off, on a batch of 32 and one of 16 with odd sizes. The
// recipe is a function of (seed, sample), so backends that run the same variant agree bit for
// bit.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "tests/ops/op_cases.h"

namespace convoy::optest {
namespace {

struct AugmentCase {
  const char* what;
  Shape shape;  // (N, C, H, W) u8
  NormalizeAugment a;
  uint64_t seed;
};

NormalizeAugment augment(std::initializer_list<float> mean, std::initializer_list<float> std, int64_t pad, bool flip) {
  NormalizeAugment a;
  std::copy(mean.begin(), mean.end(), a.mean);
  std::copy(std.begin(), std.end(), a.std);
  a.crop_padding = pad;
  a.horizontal_flip = flip;
  return a;
}

const AugmentCase kCases[] = {
    {"pad2_flip", {32, 3, 8, 6}, augment({0.5f, 0.4f, 0.3f}, {0.2f, 0.25f, 0.3f}, 2, true), 7},
    {"plain", {32, 3, 8, 6}, augment({0.5f, 0.4f, 0.3f}, {0.2f, 0.25f, 0.3f}, 0, false), 7},
    {"pad0", {16, 3, 9, 11}, augment({0.49f, 0.48f, 0.45f}, {0.25f, 0.24f, 0.26f}, 0, false), 0x5EED},
    {"pad3_flip", {16, 3, 9, 11}, augment({0.49f, 0.48f, 0.45f}, {0.25f, 0.24f, 0.26f}, 3, true), 0x5EED + 3},
    {"pad2", {16, 3, 9, 11}, augment({0.49f, 0.48f, 0.45f}, {0.25f, 0.24f, 0.26f}, 2, false), 0x5EED + 2},
    {"flip", {16, 3, 9, 11}, augment({0.49f, 0.48f, 0.45f}, {0.25f, 0.24f, 0.26f}, 0, true), 0x5EED},
};

std::vector<uint8_t> pixels(const Shape& s) {
  std::vector<uint8_t> out;
  for (int32_t v : ref::random_ints(numel(s), 256, 151)) out.push_back(static_cast<uint8_t>(v));
  return out;
}

// (u8 / 255 - mean) / std in f32: a few roundings of a value of magnitude ~2.
constexpr Tolerance kAugmentTol{1e-6, 1e-2, 2e-3};

// The batch's draws must include flips and non-flips, and shifts of both signs, or the
// comparison would not exercise the recipe; without augmentation the reference must be plain
// normalization.
std::string recipe_exercised(const AugmentCase& c, const Outputs& got) {
  if (c.a.crop_padding == 0 && !c.a.horizontal_flip) {
    const std::vector<uint8_t> px = pixels(c.shape);
    const int64_t plane = c.shape[2] * c.shape[3];
    Vec want(px.size());
    for (size_t i = 0; i < px.size(); ++i) {
      const int64_t ch = (static_cast<int64_t>(i) / plane) % c.shape[1];
      want[i] = (px[i] / 255.0 - c.a.mean[ch]) / c.a.std[ch];
    }
    const std::string diff = compare(got[0].values, want, 1e-2);
    return diff.empty() ? "" : "without augmentation the result is not plain normalization: " + diff;
  }
  int flips = 0, negative = 0, positive = 0;
  for (int64_t n = 0; n < c.shape[0]; ++n) {
    const ref::AugmentDraw d = ref::augment_draw(c.a, c.seed, n);
    flips += d.flip;
    negative += d.dy < 0 || d.dx < 0;
    positive += d.dy > 0 || d.dx > 0;
    if (std::abs(d.dy) > c.a.crop_padding || std::abs(d.dx) > c.a.crop_padding) return "a crop offset beyond the padding";
  }
  if (c.a.horizontal_flip && (flips == 0 || flips == c.shape[0])) return "the batch draws no flip, or only flips";
  if (c.a.crop_padding > 0 && (negative == 0 || positive == 0)) return "the batch draws shifts of one sign only";
  return "";
}

OpCase augment_case(const AugmentCase& c) {
  OpCase oc;
  oc.name = std::string("normalize_augment/") + c.what + "_" + shape_name(c.shape);
  oc.op = OpKind::normalize_augment;
  oc.layouts = {Layout::nchw, Layout::nhwc};
  oc.tol = kAugmentTol;
  oc.prepare = [c](Backend& be, const Variant& v, DType) {
    struct State { Tensor images, y; };
    auto s = std::make_shared<State>();
    const std::vector<uint8_t> px = pixels(c.shape);
    Tensor host = Tensor::empty(c.shape, DType::u8);
    std::memcpy(host.raw(), px.data(), px.size());
    s->images = be.upload(host);
    s->y = poisoned(be, c.shape, v.dtype, v.layout);
    return Prepared{[&be, c, s] { be.ops().normalize_augment(s->images, c.a, c.seed, s->y); },
                    [s] { return Outputs{{"y", read(s->y), std::nullopt, /*same_bits=*/true}}; }};
  };
  oc.reference = [c](const Variant&, DType) {
    return Outputs{{"y", ref::normalize_augment(pixels(c.shape), c.shape, c.a, c.seed)}};
  };
  oc.invariants = [c](const Outputs& got) { return recipe_exercised(c, got); };
  return oc;
}

}  // namespace

std::vector<OpCase> normalize_augment_cases() {
  std::vector<OpCase> cases;
  for (const AugmentCase& c : kCases) cases.push_back(augment_case(c));
  return cases;
}

}  // namespace convoy::optest
