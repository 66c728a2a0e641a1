// Linear: y = x W^T + b over per-sample feature vectors. A (C, 1, 1) input (after global
// pooling) is taken as C features, so no flatten is needed there.
#include "engine/layers/registry.h"

namespace convoy {

namespace {

class Linear final : public Layer {
 public:
  Linear(const std::string& name, const LayerAttrs& a) : Layer(name) {
    spec_.out_features = a.get_int("out_features");
    spec_.bias = a.get_bool("bias", LinearSpec{}.bias);
    if (spec_.out_features <= 0) a.fail("out_features", "must be positive");
    spec_.out_features = a.get_int_in("out_features", 1, kMaxChannels);
  }

  LayerSpec spec() const override { return spec_; }
  std::vector<OpKind> ops() const override { return {OpKind::linear_forward, OpKind::linear_backward}; }

  Shape build(std::span<const Shape> in, std::mt19937_64& rng) override {
    expect_inputs(*this, in, 1, 0);
    const Shape& s = in[0];
    const bool pooled = s.size() == 3 && s[1] == 1 && s[2] == 1;
    if (s.size() != 1 && !pooled)
      layer_error(*this, "expects per-sample features (F) or (C, 1, 1), got " + shape_str(s) +
                             "; add a flatten or global pooling layer before it");
    in_features_ = shape_numel(s);
    if (in_features_ > kMaxLayerParameters / spec_.out_features)
      layer_error(*this, "out_features " + std::to_string(spec_.out_features) + " x " + std::to_string(in_features_) +
                             " input features is more than the " + std::to_string(kMaxLayerParameters) +
                             " weights a layer may have");
    weight_.value = uniform_init({spec_.out_features, in_features_}, in_features_, rng);
    if (spec_.bias) {
      bias_.value = uniform_init({spec_.out_features}, in_features_, rng);
      bias_.weight_decay = false;
    }
    return {spec_.out_features};
  }

  Tensor forward(Backend& be, std::span<const Tensor> in, const StepInfo&) override {
    const Tensor x = features(in[0]);  // (N, F)
    Tensor y = be.empty({x.dim(0), spec_.out_features}, x.dtype());  // (N, M)
    be.ops().linear_forward(x, weight_.weight(), spec_.bias ? bias_.weight() : Tensor(), y);
    return y;
  }

  std::vector<Tensor> backward(Backend& be, std::span<const Tensor> in, const Tensor&,
                               const Tensor& dy, std::span<const bool> needs) override {
    const Tensor x = features(in[0]);
    Tensor dx;
    if (needs[0]) dx = be.empty(x.shape(), x.dtype());
    Tensor no_bias;
    be.ops().linear_backward(x, weight_.weight(), dy, dx, weight_.weight_grad(),
                             spec_.bias ? bias_.weight_grad() : no_bias);
    if (dx.defined()) dx = dx.reshape(in[0].shape()).with_layout(in[0].layout());  // (C, 1, 1): same memory
    return {dx};
  }

  std::vector<Parameter*> parameters() override {
    if (spec_.bias) return {&weight_, &bias_};
    return {&weight_};
  }

  int64_t forward_flops(std::span<const Shape>, const Shape&) const override {
    return 2 * in_features_ * spec_.out_features;
  }

 private:
  static Tensor features(const Tensor& x) {
    return x.ndim() == 2 ? x : x.with_layout(Layout::nchw).reshape({x.dim(0), x.numel() / x.dim(0)});
  }

  LinearSpec spec_;
  int64_t in_features_ = 0;
  Parameter weight_{"weight"};  // (M, F)
  Parameter bias_{"bias"};      // (M)
};

}  // namespace

std::unique_ptr<Layer> make_linear(const std::string& name, const LayerAttrs& attrs) {
  return std::make_unique<Linear>(name, attrs);
}
CONVOY_REGISTER_LAYER(make_linear, LinearSpec{});

}  // namespace convoy
