// Layers that reshape, combine or mask activations: Flatten, Dropout, Add, Concat.
#include <cstring>

#include "engine/core/counter_rng.h"
#include "engine/core/error.h"
#include "engine/layers/registry.h"

namespace convoy {

namespace {

class Flatten final : public Layer {
 public:
  using Layer::Layer;
  LayerSpec spec() const override { return FlattenSpec{}; }
  std::vector<OpKind> ops() const override { return {OpKind::cast}; }

  Shape build(std::span<const Shape> in, std::mt19937_64&) override {
    expect_inputs(*this, in, 1, 0);
    return {shape_numel(in[0])};
  }

  // Features in PyTorch's (C, H, W) order whatever the activations' layout.
  Tensor forward(Backend& be, std::span<const Tensor> in, const StepInfo&) override {
    const Tensor x = in_layout(be, in[0], Layout::nchw);
    return x.reshape({x.dim(0), x.numel() / x.dim(0)});
  }

  std::vector<Tensor> backward(Backend& be, std::span<const Tensor> in, const Tensor&,
                               const Tensor& dy, std::span<const bool> needs) override {
    if (!needs[0]) return {Tensor()};
    return {in_layout(be, dy.reshape(in[0].shape()), in[0].layout())};
  }
};

// FNV-1a of the layer name: a stable per-layer stream of dropout masks.
uint64_t name_hash(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

class Dropout final : public Layer {
 public:
  Dropout(const std::string& name, const LayerAttrs& a) : Layer(name) {
    p_ = static_cast<float>(a.get_double("p", DropoutSpec::kP));
    if (p_ < 0 || p_ >= 1) a.fail("p", "must be in [0, 1)");
  }
  LayerSpec spec() const override { return DropoutSpec{.p = p_}; }
  bool draws_per_step() const override { return p_ > 0; }
  std::vector<OpKind> ops() const override { return {OpKind::dropout_forward, OpKind::dropout_backward}; }

  Shape build(std::span<const Shape> in, std::mt19937_64&) override {
    expect_inputs(*this, in, 1, 0);
    return in[0];
  }

  Tensor forward(Backend& be, std::span<const Tensor> in, const StepInfo& step) override {
    if (!step.training || p_ == 0) return in[0];
    seed_ = counter_hash(step.seed, name_hash(name()));
    Tensor y = be.empty(in[0].shape(), in[0].dtype(), in[0].layout());
    be.ops().dropout_forward(p_, seed_, in[0], y);
    return y;
  }

  std::vector<Tensor> backward(Backend& be, std::span<const Tensor> in, const Tensor&,
                               const Tensor& dy, std::span<const bool> needs) override {
    if (!needs[0]) return {Tensor()};
    if (p_ == 0) return {dy};
    Tensor dx = be.empty(dy.shape(), dy.dtype(), dy.layout());
    be.ops().dropout_backward(p_, seed_, dy, dx);
    return {dx};
  }

 private:
  float p_ = 0;  // read by the constructor
  uint64_t seed_ = 0;  // of the last training forward
};

class Add final : public Layer {
 public:
  using Layer::Layer;
  LayerSpec spec() const override { return AddSpec{}; }
  std::vector<OpKind> ops() const override { return {OpKind::add}; }

  Shape build(std::span<const Shape> in, std::mt19937_64&) override {
    expect_inputs(*this, in, 2, 0);
    if (in[0] != in[1])
      layer_error(*this, "inputs differ in shape: " + shape_str(in[0]) + " and " + shape_str(in[1]));
    return in[0];
  }

  bool fuse_relu(bool on) override {
    relu_ = on;
    return true;
  }

  Tensor forward(Backend& be, std::span<const Tensor> in, const StepInfo&) override {
    Tensor y = be.empty(in[0].shape(), in[0].dtype(), in[0].layout());
    be.ops().add(in[0], in[1], y, relu_);
    return y;
  }

  std::vector<Tensor> backward(Backend& be, std::span<const Tensor>, const Tensor& y, const Tensor& dy,
                               std::span<const bool> needs) override {
    Tensor g = dy;
    if (relu_) {  // the fused ReLU's gradient: y > 0 exactly where a + b > 0
      g = be.empty(dy.shape(), dy.dtype(), dy.layout());
      be.ops().activation_backward(Activation::relu, 0.0f, y, y, dy, g);
    }
    // The graph never writes into a gradient it was handed, so both may share g.
    return {needs[0] ? g : Tensor(), needs[1] ? g : Tensor()};
  }

  int64_t forward_flops(std::span<const Shape>, const Shape& out) const override {
    return shape_numel(out);
  }

 private:
  bool relu_ = false;  // a ReLU fused after it (fuse_relu)
};

class Concat final : public Layer {
 public:
  using Layer::Layer;
  LayerSpec spec() const override { return ConcatSpec{}; }
  std::vector<OpKind> ops() const override { return {OpKind::concat_channels, OpKind::split_channels}; }

  Shape build(std::span<const Shape> in, std::mt19937_64&) override {
    if (in.size() < 2) layer_error(*this, "takes at least 2 inputs, got " + std::to_string(in.size()));
    expect_inputs(*this, in, 0, 3);
    Shape out = in[0];
    for (size_t i = 1; i < in.size(); ++i) {
      if (in[i][1] != out[1] || in[i][2] != out[2])
        layer_error(*this, "inputs differ in height or width: " + shape_str(in[0]) + " and " + shape_str(in[i]));
      out[0] += in[i][0];
    }
    return out;
  }

  Tensor forward(Backend& be, std::span<const Tensor> in, const StepInfo&) override {
    int64_t c = 0;
    for (const Tensor& x : in) c += x.dim(1);
    Tensor y = be.empty({in[0].dim(0), c, in[0].dim(2), in[0].dim(3)}, in[0].dtype(), in[0].layout());
    be.ops().concat_channels(in, y);
    return y;
  }

  std::vector<Tensor> backward(Backend& be, std::span<const Tensor> in, const Tensor&,
                               const Tensor& dy, std::span<const bool>) override {
    std::vector<Tensor> dx;
    for (const Tensor& x : in) dx.push_back(be.empty(x.shape(), x.dtype(), x.layout()));
    be.ops().split_channels(dy, dx);
    return dx;
  }
};

}  // namespace

std::unique_ptr<Layer> make_flatten(const std::string& name, const LayerAttrs&) {
  return std::make_unique<Flatten>(name);
}
CONVOY_REGISTER_LAYER(make_flatten, FlattenSpec{});
std::unique_ptr<Layer> make_dropout(const std::string& name, const LayerAttrs& attrs) {
  return std::make_unique<Dropout>(name, attrs);
}
CONVOY_REGISTER_LAYER(make_dropout, DropoutSpec{});
std::unique_ptr<Layer> make_add(const std::string& name, const LayerAttrs&) {
  return std::make_unique<Add>(name);
}
CONVOY_REGISTER_LAYER(make_add, AddSpec{});
std::unique_ptr<Layer> make_concat(const std::string& name, const LayerAttrs&) {
  return std::make_unique<Concat>(name);
}
CONVOY_REGISTER_LAYER(make_concat, ConcatSpec{});

}  // namespace convoy
