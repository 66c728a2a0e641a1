// Max and average pooling, and their global forms (a window over the whole plane).
#include "engine/layers/registry.h"

namespace convoy {

namespace {

class Pool2d final : public Layer {
 public:
  // global: the window is the input's whole (H, W), fixed at build.
  Pool2d(const std::string& name, PoolKind kind, bool global) : Layer(name), global_(global) { params_.kind = kind; }

  void read_window(const LayerAttrs& a) {
    const auto kernel = a.get_ints_in("kernel", 2, {}, 1, kMaxWindow);
    if (kernel.empty()) a.fail("kernel", "missing (expected an integer or [kh, kw])");
    const auto stride = a.get_ints_in("stride", 2, kernel, 1, kMaxWindow);
    const Pool2dParams d;  // the defaults
    const auto padding = a.get_ints_in("padding", 2, {d.pad_h, d.pad_w}, 0, kMaxWindow);
    params_.kernel_h = kernel[0], params_.kernel_w = kernel[1];
    params_.stride_h = stride[0], params_.stride_w = stride[1];
    params_.pad_h = padding[0], params_.pad_w = padding[1];
    if (kernel[0] <= 0 || kernel[1] <= 0) a.fail("kernel", "must be positive");
    if (stride[0] <= 0 || stride[1] <= 0) a.fail("stride", "must be positive");
    if (padding[0] < 0 || padding[1] < 0) a.fail("padding", "must not be negative");
    if (padding[0] * 2 > kernel[0] || padding[1] * 2 > kernel[1])
      a.fail("padding", "must be at most half the kernel");
  }

  LayerSpec spec() const override {
    if (global_) return GlobalPoolSpec{.kind = params_.kind};
    return Pool2dSpec{.params = params_};
  }
  std::vector<OpKind> ops() const override { return {OpKind::pool2d_forward, OpKind::pool2d_backward}; }

  Shape build(std::span<const Shape> in, std::mt19937_64&) override {
    expect_inputs(*this, in, 1, 3);
    const int64_t c = in[0][0], h = in[0][1], w = in[0][2];
    if (global_) {
      params_ = GlobalPoolSpec{.kind = params_.kind}.window(h, w);
      return {c, 1, 1};
    }
    const Shape out = pool2d_output_shape(params_, {1, c, h, w});  // (1, C, P, Q)
    const int64_t p = out[2], q = out[3];
    if (p <= 0 || q <= 0) layer_error(*this, "the window does not fit the input " + shape_str(in[0]));
    return {c, p, q};
  }

  Tensor forward(Backend& be, std::span<const Tensor> in, const StepInfo& step) override {
    const Tensor& x = in[0];  // (N, C, H, W)
    if (x.dim(2) + 2 * params_.pad_h < params_.kernel_h || x.dim(3) + 2 * params_.pad_w < params_.kernel_w)
      layer_error(*this, "input " + shape_str(x.shape()) + " is smaller than the window");
    Tensor y = be.empty(pool2d_output_shape(params_, x.shape()), x.dtype(), x.layout());  // (N, C, P, Q)
    workspace_ = Tensor();
    be.ops().pool2d_forward(params_, x, y, workspace_, step.training);
    return y;
  }

  std::vector<Tensor> backward(Backend& be, std::span<const Tensor> in, const Tensor& y,
                               const Tensor& dy, std::span<const bool> needs) override {
    if (!needs[0]) return {Tensor()};
    Tensor dx = be.empty(in[0].shape(), in[0].dtype(), in[0].layout());
    be.ops().pool2d_backward(params_, in[0], y, dy, workspace_, dx);
    return {dx};
  }

  int64_t forward_flops(std::span<const Shape>, const Shape& out) const override {
    return shape_numel(out) * params_.kernel_h * params_.kernel_w;
  }

 private:
  Pool2dParams params_;  // a global pool's window is set by build
  bool global_;
  Tensor workspace_;  // the backend's record of the last training forward
};

}  // namespace

std::unique_ptr<Layer> make_maxpool2d(const std::string& name, const LayerAttrs& attrs) {
  auto layer = std::make_unique<Pool2d>(name, PoolKind::max, false);
  layer->read_window(attrs);
  return layer;
}
CONVOY_REGISTER_LAYER(make_maxpool2d, Pool2dSpec{.params = {.kind = PoolKind::max}});

std::unique_ptr<Layer> make_avgpool2d(const std::string& name, const LayerAttrs& attrs) {
  auto layer = std::make_unique<Pool2d>(name, PoolKind::avg, false);
  layer->read_window(attrs);
  return layer;
}
CONVOY_REGISTER_LAYER(make_avgpool2d, Pool2dSpec{.params = {.kind = PoolKind::avg}});

std::unique_ptr<Layer> make_global_avg_pool(const std::string& name, const LayerAttrs&) {
  return std::make_unique<Pool2d>(name, PoolKind::avg, true);
}
CONVOY_REGISTER_LAYER(make_global_avg_pool, GlobalPoolSpec{.kind = PoolKind::avg});

std::unique_ptr<Layer> make_global_max_pool(const std::string& name, const LayerAttrs&) {
  return std::make_unique<Pool2d>(name, PoolKind::max, true);
}
CONVOY_REGISTER_LAYER(make_global_max_pool, GlobalPoolSpec{.kind = PoolKind::max});

}  // namespace convoy
