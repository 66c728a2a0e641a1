// Elementwise activations: ReLU, LeakyReLU, GELU (exact erf form, as PyTorch's default), and
// those of the mobile networks: Sigmoid, SiLU (swish), Hardsigmoid, Hardswish, ReLU6 (PyTorch's).
#include "engine/layers/registry.h"

namespace convoy {

namespace {

class ActivationLayer final : public Layer {
 public:
  ActivationLayer(const std::string& name, ActivationSpec spec) : Layer(name), spec_(spec) {}

  LayerSpec spec() const override { return spec_; }
  std::vector<OpKind> ops() const override { return {OpKind::activation_forward, OpKind::activation_backward}; }

  Shape build(std::span<const Shape> in, std::mt19937_64&) override {
    expect_inputs(*this, in, 1, 0);
    return in[0];
  }

  Tensor forward(Backend& be, std::span<const Tensor> in, const StepInfo&) override {
    Tensor y = be.empty(in[0].shape(), in[0].dtype(), in[0].layout());
    be.ops().activation_forward(spec_.kind, spec_.alpha(), in[0], y);
    return y;
  }

  std::vector<Tensor> backward(Backend& be, std::span<const Tensor> in, const Tensor& y,
                               const Tensor& dy, std::span<const bool> needs) override {
    if (!needs[0]) return {Tensor()};
    Tensor dx = be.empty(in[0].shape(), in[0].dtype(), in[0].layout());
    be.ops().activation_backward(spec_.kind, spec_.alpha(), in[0], y, dy, dx);
    return {dx};
  }

  int64_t forward_flops(std::span<const Shape>, const Shape& out) const override {
    return shape_numel(out);
  }

 private:
  ActivationSpec spec_;
};

}  // namespace

std::unique_ptr<Layer> make_relu(const std::string& name, const LayerAttrs&) {
  return std::make_unique<ActivationLayer>(name, ActivationSpec{.kind = Activation::relu});
}
CONVOY_REGISTER_LAYER(make_relu, ActivationSpec{.kind = Activation::relu});

std::unique_ptr<Layer> make_leaky_relu(const std::string& name, const LayerAttrs& a) {
  const double slope = a.get_double("negative_slope", ActivationSpec::kNegativeSlope);
  if (!(slope >= 0 && slope <= 1e6)) a.fail("negative_slope", "must be in 0 ... 1e6");
  return std::make_unique<ActivationLayer>(
      name, ActivationSpec{.kind = Activation::leaky_relu, .negative_slope = static_cast<float>(slope)});
}
CONVOY_REGISTER_LAYER(make_leaky_relu, ActivationSpec{.kind = Activation::leaky_relu});

std::unique_ptr<Layer> make_gelu(const std::string& name, const LayerAttrs&) {
  return std::make_unique<ActivationLayer>(name, ActivationSpec{.kind = Activation::gelu});
}
CONVOY_REGISTER_LAYER(make_gelu, ActivationSpec{.kind = Activation::gelu});

std::unique_ptr<Layer> make_sigmoid(const std::string& name, const LayerAttrs&) {
  return std::make_unique<ActivationLayer>(name, ActivationSpec{.kind = Activation::sigmoid});
}
CONVOY_REGISTER_LAYER(make_sigmoid, ActivationSpec{.kind = Activation::sigmoid});

std::unique_ptr<Layer> make_silu(const std::string& name, const LayerAttrs&) {
  return std::make_unique<ActivationLayer>(name, ActivationSpec{.kind = Activation::silu});
}
CONVOY_REGISTER_LAYER(make_silu, ActivationSpec{.kind = Activation::silu});

std::unique_ptr<Layer> make_hardsigmoid(const std::string& name, const LayerAttrs&) {
  return std::make_unique<ActivationLayer>(name, ActivationSpec{.kind = Activation::hardsigmoid});
}
CONVOY_REGISTER_LAYER(make_hardsigmoid, ActivationSpec{.kind = Activation::hardsigmoid});

std::unique_ptr<Layer> make_hardswish(const std::string& name, const LayerAttrs&) {
  return std::make_unique<ActivationLayer>(name, ActivationSpec{.kind = Activation::hardswish});
}
CONVOY_REGISTER_LAYER(make_hardswish, ActivationSpec{.kind = Activation::hardswish});

std::unique_ptr<Layer> make_relu6(const std::string& name, const LayerAttrs&) {
  return std::make_unique<ActivationLayer>(name, ActivationSpec{.kind = Activation::relu6});
}
CONVOY_REGISTER_LAYER(make_relu6, ActivationSpec{.kind = Activation::relu6});

}  // namespace convoy
