// Softmax over channels inside a model (torch.nn.Softmax(dim=1)): a segmentation head's
// per-pixel class probabilities, or probabilities as a model's output. Training on its output
// with the cross-entropy loss applies softmax twice; it is meant for what a model hands on.
#include "engine/layers/registry.h"

namespace convoy {

namespace {

class Softmax final : public Layer {
 public:
  using Layer::Layer;
  LayerSpec spec() const override { return SoftmaxSpec{}; }
  std::vector<OpKind> ops() const override {
    return {OpKind::channel_softmax_forward, OpKind::channel_softmax_backward};
  }

  // (C) features or (C, H, W) planes per sample; the softmax runs over C.
  Shape build(std::span<const Shape> in, std::mt19937_64&) override {
    expect_inputs(*this, in, 1, 0);
    if (in[0].size() != 1 && in[0].size() != 3)
      layer_error(*this, "expects (C) or (C, H, W) per sample, got " + shape_str(in[0]));
    return in[0];
  }

  Tensor forward(Backend& be, std::span<const Tensor> in, const StepInfo&) override {
    Tensor y = be.empty(in[0].shape(), in[0].dtype(), in[0].layout());
    be.ops().channel_softmax_forward(in[0], y);
    return y;
  }

  // The gradient needs only the output: dx = y * (dy - sum_c y dy).
  std::vector<Tensor> backward(Backend& be, std::span<const Tensor> in, const Tensor& y, const Tensor& dy,
                               std::span<const bool> needs) override {
    if (!needs[0]) return {Tensor()};
    Tensor dx = be.empty(in[0].shape(), in[0].dtype(), in[0].layout());
    be.ops().channel_softmax_backward(y, dy, dx);
    return {dx};
  }

  // An exponential, a sum and a division per element.
  int64_t forward_flops(std::span<const Shape>, const Shape& out) const override { return 3 * shape_numel(out); }
};

}  // namespace

std::unique_ptr<Layer> make_softmax(const std::string& name, const LayerAttrs&) {
  return std::make_unique<Softmax>(name);
}
CONVOY_REGISTER_LAYER(make_softmax, SoftmaxSpec{});

}  // namespace convoy
