#pragma once
// LayerSpec: a layer's attributes, typed, one struct per layer type. A layer's factory reads its
// attributes into one (Layer::spec() returns it); everything else that needs to know what a
// layer is (Model's fusion, compiled inference, ONNX export and import) reads the spec instead
// of matching type names. Each struct's type() is the model YAML's type name, and its member
// initializers are the attributes' defaults: neither is written anywhere else.
#include <cstdint>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/ops/activation.h"
#include "engine/ops/conv2d.h"
#include "engine/ops/pool2d.h"
#include "engine/ops/upsample.h"

namespace convoy {

struct Conv2dSpec {
  int64_t out_channels = 0;         // required
  int64_t kernel_h = 0, kernel_w = 0;  // required
  Conv2dParams params{};            // stride 1, padding 0, dilation 1, groups 1
  bool bias = true;
  static constexpr std::string_view type() { return "conv2d"; }
};

struct BatchNormSpec {
  // PyTorch's BatchNorm2d defaults, as doubles: the model YAML's and ONNX's values before the cast.
  static constexpr double kEps = 1e-5;
  static constexpr double kMomentum = 0.1;
  float eps = static_cast<float>(kEps);
  float momentum = static_cast<float>(kMomentum);
  static constexpr std::string_view type() { return "batchnorm2d"; }
};

struct LinearSpec {
  int64_t out_features = 0;  // required
  bool bias = true;
  static constexpr std::string_view type() { return "linear"; }
};

// relu, leaky_relu, gelu, sigmoid, silu, hardsigmoid, hardswish and relu6: one layer type per kind.
struct ActivationSpec {
  static constexpr double kNegativeSlope = 0.01;  // PyTorch's LeakyReLU and ONNX's LeakyRelu alpha
  Activation kind = Activation::relu;
  float negative_slope = static_cast<float>(kNegativeSlope);  // leaky_relu only
  // The ops' alpha argument: the slope for leaky_relu, 0 for the others.
  float alpha() const { return kind == Activation::leaky_relu ? negative_slope : 0.0f; }
  constexpr std::string_view type() const {
    switch (kind) {
      case Activation::relu: return "relu";
      case Activation::leaky_relu: return "leaky_relu";
      case Activation::gelu: return "gelu";
      case Activation::sigmoid: return "sigmoid";
      case Activation::silu: return "silu";
      case Activation::hardsigmoid: return "hardsigmoid";
      case Activation::hardswish: return "hardswish";
      case Activation::relu6: return "relu6";
    }
    return "?";  // unreachable: the switch is exhaustive (-Werror=switch)
  }
};

// maxpool2d and avgpool2d (params.kind); the stride defaults to the kernel.
struct Pool2dSpec {
  Pool2dParams params{};  // the kernel is required
  constexpr std::string_view type() const { return params.kind == PoolKind::max ? "maxpool2d" : "avgpool2d"; }
};

// global_max_pool and global_avg_pool: a window over the whole input plane.
struct GlobalPoolSpec {
  PoolKind kind = PoolKind::avg;
  constexpr std::string_view type() const { return kind == PoolKind::max ? "global_max_pool" : "global_avg_pool"; }
  // The window over an input plane of h x w.
  Pool2dParams window(int64_t h, int64_t w) const {
    return {.kind = kind, .kernel_h = h, .kernel_w = w, .stride_h = h, .stride_w = w};
  }
};

struct FlattenSpec {
  static constexpr std::string_view type() { return "flatten"; }
};

struct DropoutSpec {
  static constexpr double kP = 0.5;
  float p = static_cast<float>(kP);
  static constexpr std::string_view type() { return "dropout"; }
};

struct AddSpec {
  static constexpr std::string_view type() { return "add"; }
};

struct ConcatSpec {
  static constexpr std::string_view type() { return "concat"; }
};

// Two inputs, x (C, H, W) and s (C, 1, 1) or (C) per sample, in either order: x * s with s
// broadcast over H and W, squeeze-and-excitation's `x * scale` (ONNX's Mul).
struct MulSpec {
  static constexpr std::string_view type() { return "mul"; }
  // Which of a mul's two per-sample input shapes is the per-channel factor s (the second where
  // both could be), or -1 where neither is one for the other.
  static int scale_input(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    auto scales = [](const std::vector<int64_t>& x, const std::vector<int64_t>& s) {
      return x.size() == 3 && !s.empty() && s[0] == x[0] &&
             (s.size() == 1 || (s.size() == 3 && s[1] == 1 && s[2] == 1));
    };
    return scales(a, b) ? 1 : scales(b, a) ? 0 : -1;
  }
};

// Softmax over channels (dim 1), torch.nn.Softmax(dim=1); ONNX Softmax axis 1.
struct SoftmaxSpec {
  static constexpr std::string_view type() { return "softmax"; }
};

// Nearest or bilinear resizing (align_corners=False), torch.nn.Upsample: by a whole factor per
// axis (scale), or to a fixed size (size); exactly one of the two is given.
struct UpsampleSpec {
  UpsampleMode mode = UpsampleMode::nearest;  // PyTorch's default
  int64_t scale_h = 0, scale_w = 0;  // > 0 when given by scale
  int64_t size_h = 0, size_w = 0;    // > 0 when given by size
  static constexpr std::string_view type() { return "upsample"; }
  // The output's (H, W) for an input plane of h x w.
  int64_t out_h(int64_t h) const { return scale_h > 0 ? h * scale_h : size_h; }
  int64_t out_w(int64_t w) const { return scale_w > 0 ? w * scale_w : size_w; }
};

using LayerSpec = std::variant<Conv2dSpec, BatchNormSpec, LinearSpec, ActivationSpec, Pool2dSpec, GlobalPoolSpec,
                               FlattenSpec, DropoutSpec, AddSpec, ConcatSpec, MulSpec, SoftmaxSpec, UpsampleSpec>;

// The model YAML's type name of a spec's layer: "conv2d", "leaky_relu", ...
inline std::string_view layer_type(const LayerSpec& spec) {
  return std::visit([](const auto& s) { return s.type(); }, spec);
}

inline bool is_relu(const LayerSpec& spec) {
  const auto* activation = std::get_if<ActivationSpec>(&spec);
  return activation && activation->kind == Activation::relu;
}

// std::visit over a LayerSpec with one lambda per type: std::visit(Overloaded{...}, spec).
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace convoy
