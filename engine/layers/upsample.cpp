// Nearest and bilinear upsampling (torch.nn.Upsample / F.interpolate, align_corners=False):
// by a whole factor per axis (`scale: 2`, `scale: [2, 3]`) or to a fixed size (`size: [H, W]`).
#include <algorithm>
#include <tuple>

#include "engine/layers/registry.h"

namespace convoy {

namespace {

// The largest factor a model may ask for: a typo beyond it would allocate without bound.
constexpr int64_t kMaxUpsampleScale = 64;

class Upsample final : public Layer {
 public:
  Upsample(const std::string& name, UpsampleSpec spec) : Layer(name), spec_(spec) {}

  LayerSpec spec() const override { return spec_; }
  std::vector<OpKind> ops() const override { return {OpKind::upsample_forward, OpKind::upsample_backward}; }

  Shape build(std::span<const Shape> in, std::mt19937_64&) override {
    expect_inputs(*this, in, 1, 3);
    const int64_t c = in[0][0], h = in[0][1], w = in[0][2];
    const int64_t p = spec_.out_h(h), q = spec_.out_w(w);
    for (const auto& [from, to, axis] : {std::tuple{h, p, "height"}, std::tuple{w, q, "width"}}) {
      const std::string why = upsample_refusal(spec_.mode, from, to);
      if (!why.empty())
        layer_error(*this, why + " (" + axis + " " + std::to_string(from) + " -> " + std::to_string(to) +
                               "; the input is " + shape_str(in[0]) + ")");
    }
    if (c * p * q > kMaxSampleElements)
      layer_error(*this, "output " + shape_str({c, p, q}) + " per sample is too large");
    return {c, p, q};
  }

  Tensor forward(Backend& be, std::span<const Tensor> in, const StepInfo&) override {
    const Tensor& x = in[0];  // (N, C, H, W)
    Tensor y = be.empty({x.dim(0), x.dim(1), spec_.out_h(x.dim(2)), spec_.out_w(x.dim(3))}, x.dtype(), x.layout());
    be.ops().upsample_forward(spec_.mode, x, y);
    return y;
  }

  std::vector<Tensor> backward(Backend& be, std::span<const Tensor> in, const Tensor&, const Tensor& dy,
                               std::span<const bool> needs) override {
    if (!needs[0]) return {Tensor()};
    Tensor dx = be.empty(in[0].shape(), in[0].dtype(), in[0].layout());
    be.ops().upsample_backward(spec_.mode, dy, dx);
    return {dx};
  }

  // Bilinear: four multiply-adds per output element.
  int64_t forward_flops(std::span<const Shape>, const Shape& out) const override {
    return spec_.mode == UpsampleMode::bilinear ? 8 * shape_numel(out) : 0;
  }

 private:
  UpsampleSpec spec_;
};

}  // namespace

std::unique_ptr<Layer> make_upsample(const std::string& name, const LayerAttrs& a) {
  UpsampleSpec spec;
  const std::string mode = a.get_string("mode", "nearest");
  if (mode == "nearest") spec.mode = UpsampleMode::nearest;
  else if (mode == "bilinear") spec.mode = UpsampleMode::bilinear;
  else a.fail("mode", "'" + mode + "' is not a mode (expected nearest or bilinear)");
  const bool by_scale = a.has("scale"), by_size = a.has("size");
  if (by_scale == by_size)
    a.fail(by_scale ? "size" : "scale",
           by_scale ? "give scale or size, not both" : "missing (expected scale: N or [sh, sw], or size: [H, W])");
  if (by_scale) {
    const auto scale = a.get_ints_in("scale", 2, {}, 1, kMaxUpsampleScale);
    spec.scale_h = scale[0], spec.scale_w = scale[1];
  } else {
    const auto size = a.get_ints_in("size", 2, {}, 1, kMaxChannels);
    spec.size_h = size[0], spec.size_w = size[1];
  }
  return std::make_unique<Upsample>(name, spec);
}
CONVOY_REGISTER_LAYER(make_upsample, UpsampleSpec{});

}  // namespace convoy
