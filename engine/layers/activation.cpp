// Elementwise activations: ReLU, LeakyReLU, GELU (exact erf form, as PyTorch's default).
#include "engine/layers/registry.h"

namespace convoy {

namespace {

class ActivationLayer final : public Layer {
 public:
  ActivationLayer(const std::string& name, Activation kind, std::string_view type, float alpha)
      : Layer(name), kind_(kind), type_(type), alpha_(alpha) {}

  std::string_view type() const override { return type_; }
  std::vector<OpKind> ops() const override { return {OpKind::activation_forward, OpKind::activation_backward}; }

  Shape build(std::span<const Shape> in, std::mt19937_64&) override {
    expect_inputs(*this, in, 1, 0);
    return in[0];
  }

  Tensor forward(Backend& be, std::span<const Tensor> in, const StepInfo&) override {
    Tensor y = be.empty(in[0].shape(), in[0].dtype(), in[0].layout());
    be.ops().activation_forward(kind_, alpha_, in[0], y);
    return y;
  }

  std::vector<Tensor> backward(Backend& be, std::span<const Tensor> in, const Tensor& y,
                               const Tensor& dy, std::span<const bool> needs) override {
    if (!needs[0]) return {Tensor()};
    Tensor dx = be.empty(in[0].shape(), in[0].dtype(), in[0].layout());
    be.ops().activation_backward(kind_, alpha_, in[0], y, dy, dx);
    return {dx};
  }

  LayerSpec spec() const override {
    LayerSpec s;
    s.activation = kind_;
    s.alpha = alpha_;
    return s;
  }

  int64_t forward_flops(std::span<const Shape>, const Shape& out) const override {
    return shape_numel(out);
  }

 private:
  Activation kind_;
  std::string_view type_;
  float alpha_;
};

}  // namespace

std::unique_ptr<Layer> make_relu(const std::string& name, const LayerAttrs&) {
  return std::make_unique<ActivationLayer>(name, Activation::relu, "relu", 0.0f);
}
CONVOY_REGISTER_LAYER(relu, make_relu);

std::unique_ptr<Layer> make_leaky_relu(const std::string& name, const LayerAttrs& a) {
  const double slope = a.get_double("negative_slope", 0.01);
  if (!(slope >= 0 && slope <= 1e6)) a.fail("negative_slope", "must be in 0 ... 1e6");
  return std::make_unique<ActivationLayer>(name, Activation::leaky_relu, "leaky_relu", static_cast<float>(slope));
}
CONVOY_REGISTER_LAYER(leaky_relu, make_leaky_relu);

std::unique_ptr<Layer> make_gelu(const std::string& name, const LayerAttrs&) {
  return std::make_unique<ActivationLayer>(name, Activation::gelu, "gelu", 0.0f);
}
CONVOY_REGISTER_LAYER(gelu, make_gelu);

}  // namespace convoy
