// Conv2d: cross-correlation with stride, padding, dilation, groups and optional bias.
#include "engine/core/error.h"
#include "engine/layers/registry.h"

namespace convoy {

namespace {

class Conv2d final : public Layer {
 public:
  Conv2d(const std::string& name, const LayerAttrs& a) : Layer(name) {
    out_channels_ = a.get_int("out_channels");
    if (out_channels_ <= 0) a.fail("out_channels", "must be positive");
    out_channels_ = a.get_int_in("out_channels", 1, kMaxChannels);
    const auto kernel = a.get_ints_in("kernel", 2, {}, 1, kMaxWindow);
    if (kernel.empty()) a.fail("kernel", "missing (expected an integer or [kh, kw])");
    const auto stride = a.get_ints_in("stride", 2, {1, 1}, 1, kMaxWindow);
    const auto padding = a.get_ints_in("padding", 2, {0, 0}, 0, kMaxWindow);
    const auto dilation = a.get_ints_in("dilation", 2, {1, 1}, 1, kMaxWindow);
    params_.groups = a.get_int_in("groups", 1, 1, kMaxChannels);
    has_bias_ = a.get_bool("bias", true);
    kernel_h_ = kernel[0];
    kernel_w_ = kernel[1];
    params_.stride_h = stride[0], params_.stride_w = stride[1];
    params_.pad_h = padding[0], params_.pad_w = padding[1];
    params_.dilation_h = dilation[0], params_.dilation_w = dilation[1];
    if (out_channels_ <= 0) a.fail("out_channels", "must be positive");
    if (kernel_h_ <= 0 || kernel_w_ <= 0) a.fail("kernel", "must be positive");
    if (stride[0] <= 0 || stride[1] <= 0) a.fail("stride", "must be positive");
    if (padding[0] < 0 || padding[1] < 0) a.fail("padding", "must not be negative");
    if (dilation[0] <= 0 || dilation[1] <= 0) a.fail("dilation", "must be positive");
    if (params_.groups <= 0) a.fail("groups", "must be positive");
    if (out_channels_ % params_.groups) a.fail("groups", "must divide out_channels");
  }

  std::string_view type() const override { return "conv2d"; }
  std::vector<OpKind> ops() const override { return {OpKind::conv2d_forward, OpKind::conv2d_backward_data, OpKind::conv2d_backward_weights}; }

  Shape build(std::span<const Shape> in, std::mt19937_64& rng) override {
    expect_inputs(*this, in, 1, 3);
    const int64_t c = in[0][0], h = in[0][1], w = in[0][2];
    if (c % params_.groups)
      layer_error(*this, "groups " + std::to_string(params_.groups) + " does not divide the " +
                             std::to_string(c) + " input channels of " + shape_str(in[0]));
    const int64_t p = conv2d_output_size(h, kernel_h_, params_.stride_h, params_.pad_h, params_.dilation_h);
    const int64_t q = conv2d_output_size(w, kernel_w_, params_.stride_w, params_.pad_w, params_.dilation_w);
    if (p <= 0 || q <= 0)
      layer_error(*this, "the kernel does not fit the input " + shape_str(in[0]));
    const int64_t fan_in = c / params_.groups * kernel_h_ * kernel_w_;  // <= 2^24 * 2^20
    if (fan_in > kMaxLayerParameters / out_channels_)
      layer_error(*this, "out_channels " + std::to_string(out_channels_) + " x " + std::to_string(fan_in) +
                             " weights per output channel is more than the " + std::to_string(kMaxLayerParameters) +
                             " weights a layer may have");
    weight_.value = uniform_init({out_channels_, c / params_.groups, kernel_h_, kernel_w_}, fan_in, rng);
    if (has_bias_) {
      bias_.value = uniform_init({out_channels_}, fan_in, rng);
      bias_.weight_decay = false;
    }
    return {out_channels_, p, q};
  }

  Tensor forward(Backend& be, std::span<const Tensor> in, const StepInfo&) override {
    const Tensor& x = in[0];  // (N, C, H, W)
    const Shape out = output_shape(x);
    Tensor y = be.empty(out, x.dtype(), x.layout());  // (N, K, P, Q)
    be.ops().conv2d_forward(params_, x, weight_.weight(), has_bias_ ? bias_.weight() : Tensor(), y);
    return y;
  }

  std::vector<Tensor> backward(Backend& be, std::span<const Tensor> in, const Tensor&,
                               const Tensor& dy, std::span<const bool> needs) override {
    const Tensor& x = in[0];
    Tensor dx;
    if (needs[0]) {
      dx = be.empty(x.shape(), x.dtype(), x.layout());
      be.ops().conv2d_backward_data(params_, dy, weight_.weight(), dx);
    }
    weight_grads(be, x, dy);
    return {dx};
  }

  bool adds_input_grad() const override { return true; }
  void backward_adding(Backend& be, std::span<const Tensor> in, const Tensor&, const Tensor& dy,
                       Tensor& input_grad) override {
    be.ops().conv2d_backward_data(params_, dy, weight_.weight(), input_grad, /*accumulate=*/true);
    weight_grads(be, in[0], dy);
  }

  LayerSpec spec() const override {
    LayerSpec s;
    s.conv = params_;
    return s;
  }

  std::vector<Parameter*> parameters() override {
    if (has_bias_) return {&weight_, &bias_};
    return {&weight_};
  }

  int64_t forward_flops(std::span<const Shape> in, const Shape& out) const override {
    return saturating_mul(2 * shape_numel(out), (in[0][0] / params_.groups) * kernel_h_ * kernel_w_);
  }

 private:
  void weight_grads(Backend& be, const Tensor& x, const Tensor& dy) {
    Tensor no_bias;
    be.ops().conv2d_backward_weights(params_, x, dy, weight_.weight_grad(),
                                     has_bias_ ? bias_.weight_grad() : no_bias);
  }

  Shape output_shape(const Tensor& x) const {
    return conv2d_output_shape(params_, x.shape(),
                               {out_channels_, x.dim(1) / params_.groups, kernel_h_, kernel_w_});
  }

  int64_t out_channels_ = 0, kernel_h_ = 0, kernel_w_ = 0;
  bool has_bias_ = true;
  Conv2dParams params_;
  Parameter weight_{"weight"};  // (K, C/groups, R, S)
  Parameter bias_{"bias"};      // (K)
};

}  // namespace

std::unique_ptr<Layer> make_conv2d(const std::string& name, const LayerAttrs& attrs) {
  return std::make_unique<Conv2d>(name, attrs);
}
CONVOY_REGISTER_LAYER(conv2d, make_conv2d);

}  // namespace convoy
