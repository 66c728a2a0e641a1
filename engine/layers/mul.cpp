// Mul: squeeze-and-excitation's channel-wise product x * s, s one number per (sample, channel)
// (the SE branch's sigmoid of a 1x1 convolution of the pooled x), broadcast over H and W.
#include "engine/layers/registry.h"

namespace convoy {

namespace {

class Mul final : public Layer {
 public:
  using Layer::Layer;
  LayerSpec spec() const override { return MulSpec{}; }
  std::vector<OpKind> ops() const override {
    return {OpKind::channel_scale_forward, OpKind::channel_scale_backward};
  }

  Shape build(std::span<const Shape> in, std::mt19937_64&) override {
    expect_inputs(*this, in, 2, 0);
    scale_ = MulSpec::scale_input(in[0], in[1]);
    if (scale_ < 0)
      layer_error(*this, "multiplies (C, H, W) by one number per channel, (C, 1, 1) or (C), in either order; got " +
                             shape_str(in[0]) + " and " + shape_str(in[1]));
    return in[1 - scale_];
  }

  Tensor forward(Backend& be, std::span<const Tensor> in, const StepInfo&) override {
    const Tensor& x = in[1 - scale_];
    Tensor y = be.empty(x.shape(), x.dtype(), x.layout());
    be.ops().channel_scale_forward(x, in[scale_], y);
    return y;
  }

  std::vector<Tensor> backward(Backend& be, std::span<const Tensor> in, const Tensor&, const Tensor& dy,
                               std::span<const bool> needs) override {
    const Tensor &x = in[1 - scale_], &s = in[scale_];
    Tensor dx = needs[1 - scale_] ? be.empty(x.shape(), x.dtype(), x.layout()) : Tensor();
    Tensor ds = needs[scale_] ? be.empty(s.shape(), s.dtype(), s.layout()) : Tensor();
    if (dx.defined() || ds.defined()) be.ops().channel_scale_backward(x, s, dy, dx, ds);
    std::vector<Tensor> grads(2);
    grads[1 - scale_] = dx;
    grads[scale_] = ds;
    return grads;
  }

  int64_t forward_flops(std::span<const Shape>, const Shape& out) const override { return shape_numel(out); }

 private:
  int scale_ = 1;  // which input is the per-channel factor s (build)
};

}  // namespace

std::unique_ptr<Layer> make_mul(const std::string& name, const LayerAttrs&) { return std::make_unique<Mul>(name); }
CONVOY_REGISTER_LAYER(make_mul, MulSpec{});

}  // namespace convoy
