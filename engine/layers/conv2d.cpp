// Conv2d: cross-correlation with stride, padding, dilation, groups and optional bias.
#include "engine/core/error.h"
#include "engine/layers/registry.h"

namespace convoy {

namespace {

class Conv2d final : public Layer {
 public:
  Conv2d(const std::string& name, const LayerAttrs& a) : Layer(name) {
    const Conv2dParams d;  // the defaults
    int64_t& out_channels = spec_.out_channels;
    out_channels = a.get_int("out_channels");
    if (out_channels <= 0) a.fail("out_channels", "must be positive");
    out_channels = a.get_int_in("out_channels", 1, kMaxChannels);
    const auto kernel = a.get_ints_in("kernel", 2, {}, 1, kMaxWindow);
    if (kernel.empty()) a.fail("kernel", "missing (expected an integer or [kh, kw])");
    const auto stride = a.get_ints_in("stride", 2, {d.stride_h, d.stride_w}, 1, kMaxWindow);
    const auto padding = a.get_ints_in("padding", 2, {d.pad_h, d.pad_w}, 0, kMaxWindow);
    const auto dilation = a.get_ints_in("dilation", 2, {d.dilation_h, d.dilation_w}, 1, kMaxWindow);
    Conv2dParams& p = spec_.params;
    p.groups = a.get_int_in("groups", d.groups, 1, kMaxChannels);
    spec_.bias = a.get_bool("bias", Conv2dSpec{}.bias);
    spec_.kernel_h = kernel[0];
    spec_.kernel_w = kernel[1];
    p.stride_h = stride[0], p.stride_w = stride[1];
    p.pad_h = padding[0], p.pad_w = padding[1];
    p.dilation_h = dilation[0], p.dilation_w = dilation[1];
    if (out_channels <= 0) a.fail("out_channels", "must be positive");
    if (spec_.kernel_h <= 0 || spec_.kernel_w <= 0) a.fail("kernel", "must be positive");
    if (stride[0] <= 0 || stride[1] <= 0) a.fail("stride", "must be positive");
    if (padding[0] < 0 || padding[1] < 0) a.fail("padding", "must not be negative");
    if (dilation[0] <= 0 || dilation[1] <= 0) a.fail("dilation", "must be positive");
    if (p.groups <= 0) a.fail("groups", "must be positive");
    if (out_channels % p.groups) a.fail("groups", "must divide out_channels");
  }

  LayerSpec spec() const override { return spec_; }
  std::vector<OpKind> ops() const override { return {OpKind::conv2d_forward, OpKind::conv2d_backward_data, OpKind::conv2d_backward_weights}; }

  Shape build(std::span<const Shape> in, std::mt19937_64& rng) override {
    expect_inputs(*this, in, 1, 3);
    const Conv2dParams& cp = spec_.params;
    const int64_t c = in[0][0], h = in[0][1], w = in[0][2];
    if (c % cp.groups)
      layer_error(*this, "groups " + std::to_string(cp.groups) + " does not divide the " +
                             std::to_string(c) + " input channels of " + shape_str(in[0]));
    const int64_t p = conv2d_output_size(h, spec_.kernel_h, cp.stride_h, cp.pad_h, cp.dilation_h);
    const int64_t q = conv2d_output_size(w, spec_.kernel_w, cp.stride_w, cp.pad_w, cp.dilation_w);
    if (p <= 0 || q <= 0)
      layer_error(*this, "the kernel does not fit the input " + shape_str(in[0]));
    const int64_t fan_in = c / cp.groups * spec_.kernel_h * spec_.kernel_w;  // <= 2^24 * 2^20
    if (fan_in > kMaxLayerParameters / spec_.out_channels)
      layer_error(*this, "out_channels " + std::to_string(spec_.out_channels) + " x " + std::to_string(fan_in) +
                             " weights per output channel is more than the " + std::to_string(kMaxLayerParameters) +
                             " weights a layer may have");
    weight_.value = uniform_init({spec_.out_channels, c / cp.groups, spec_.kernel_h, spec_.kernel_w}, fan_in, rng);
    if (spec_.bias) {
      bias_.value = uniform_init({spec_.out_channels}, fan_in, rng);
      bias_.weight_decay = false;
    }
    return {spec_.out_channels, p, q};
  }

  Tensor forward(Backend& be, std::span<const Tensor> in, const StepInfo&) override {
    const Tensor& x = in[0];  // (N, C, H, W)
    const Shape out = output_shape(x);
    Tensor y = be.empty(out, x.dtype(), x.layout());  // (N, K, P, Q)
    be.ops().conv2d_forward(spec_.params, x, weight_.weight(), spec_.bias ? bias_.weight() : Tensor(), y);
    return y;
  }

  std::vector<Tensor> backward(Backend& be, std::span<const Tensor> in, const Tensor&,
                               const Tensor& dy, std::span<const bool> needs) override {
    const Tensor& x = in[0];
    Tensor dx;
    if (needs[0]) {
      dx = be.empty(x.shape(), x.dtype(), x.layout());
      be.ops().conv2d_backward_data(spec_.params, dy, weight_.weight(), dx);
    }
    weight_grads(be, x, dy);
    return {dx};
  }

  bool adds_input_grad() const override { return true; }
  void backward_adding(Backend& be, std::span<const Tensor> in, const Tensor&, const Tensor& dy,
                       Tensor& input_grad) override {
    be.ops().conv2d_backward_data(spec_.params, dy, weight_.weight(), input_grad, /*accumulate=*/true);
    weight_grads(be, in[0], dy);
  }

  std::vector<Parameter*> parameters() override {
    if (spec_.bias) return {&weight_, &bias_};
    return {&weight_};
  }

  int64_t forward_flops(std::span<const Shape> in, const Shape& out) const override {
    return saturating_mul(2 * shape_numel(out), (in[0][0] / spec_.params.groups) * spec_.kernel_h * spec_.kernel_w);
  }

 private:
  void weight_grads(Backend& be, const Tensor& x, const Tensor& dy) {
    Tensor no_bias;
    be.ops().conv2d_backward_weights(spec_.params, x, dy, weight_.weight_grad(),
                                     spec_.bias ? bias_.weight_grad() : no_bias);
  }

  Shape output_shape(const Tensor& x) const {
    return conv2d_output_shape(spec_.params, x.shape(),
                               {spec_.out_channels, x.dim(1) / spec_.params.groups, spec_.kernel_h, spec_.kernel_w});
  }

  Conv2dSpec spec_;
  Parameter weight_{"weight"};  // (K, C/groups, R, S)
  Parameter bias_{"bias"};      // (K)
};

}  // namespace

std::unique_ptr<Layer> make_conv2d(const std::string& name, const LayerAttrs& attrs) {
  return std::make_unique<Conv2d>(name, attrs);
}
CONVOY_REGISTER_LAYER(make_conv2d, Conv2dSpec{});

}  // namespace convoy
