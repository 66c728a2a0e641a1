// BatchNorm2d: per-channel normalization with batch statistics in training and running
// statistics in evaluation (PyTorch semantics: momentum 0.1, eps 1e-5, unbiased running var).
#include "engine/layers/registry.h"

namespace convoy {

namespace {

class BatchNorm2d final : public Layer {
 public:
  BatchNorm2d(const std::string& name, const LayerAttrs& a) : Layer(name) {
    const double momentum = a.get_double("momentum", 0.1);  // finite: the reader refuses nan and inf
    const double eps = a.get_double("eps", 1e-5);
    if (!(momentum >= 0 && momentum <= 1)) a.fail("momentum", "must be in [0, 1]");
    if (!(eps > 0 && eps <= 1)) a.fail("eps", "must be positive (and at most 1)");
    momentum_ = static_cast<float>(momentum);
    eps_ = static_cast<float>(eps);
    if (eps_ <= 0) a.fail("eps", "must be positive (" + std::to_string(eps) + " is 0 as a float)");
  }

  std::string_view type() const override { return "batchnorm2d"; }
  std::vector<OpKind> ops() const override { return {OpKind::batchnorm_forward_train, OpKind::batchnorm_forward_eval, OpKind::batchnorm_backward}; }

  LayerSpec spec() const override {
    LayerSpec s;
    s.eps = eps_;
    return s;
  }

  Shape build(std::span<const Shape> in, std::mt19937_64&) override {
    expect_inputs(*this, in, 1, 3);
    const int64_t c = in[0][0];
    gamma_.value = Tensor::empty({c});
    for (int64_t i = 0; i < c; ++i) gamma_.value.data<float>()[i] = 1.0f;
    beta_.value = Tensor::zeros({c});
    running_mean_.value = Tensor::zeros({c});
    running_var_.value = Tensor::empty({c});
    for (int64_t i = 0; i < c; ++i) running_var_.value.data<float>()[i] = 1.0f;
    for (Parameter* p : {&gamma_, &beta_}) p->weight_decay = false, p->keep_f32 = true;
    return in[0];
  }

  Tensor forward(Backend& be, std::span<const Tensor> in, const StepInfo& step) override {
    const Tensor& x = in[0];  // (N, C, H, W)
    Tensor y = be.empty(x.shape(), x.dtype(), x.layout());
    if (step.training) {
      const Shape c{x.dim(1)};
      saved_mean_ = be.empty(c, DType::f32);    // (C)
      saved_invstd_ = be.empty(c, DType::f32);  // (C)
      be.ops().batchnorm_forward_train(x, gamma_.value, beta_.value, momentum_, eps_,
                                       running_mean_.value, running_var_.value, y, saved_mean_,
                                       saved_invstd_);
    } else {
      be.ops().batchnorm_forward_eval(x, gamma_.value, beta_.value, running_mean_.value,
                                      running_var_.value, eps_, y);
    }
    return y;
  }

  std::vector<Tensor> backward(Backend& be, std::span<const Tensor> in, const Tensor&,
                               const Tensor& dy, std::span<const bool>) override {
    const Tensor& x = in[0];
    // cuDNN and oneDNN compute dx together with dgamma and dbeta, so dx is always made.
    Tensor dx = be.empty(x.shape(), x.dtype(), x.layout());
    be.ops().batchnorm_backward(x, dy, gamma_.value, saved_mean_, saved_invstd_, dx, gamma_.grad, beta_.grad);
    return {dx};
  }

  std::vector<Parameter*> parameters() override { return {&gamma_, &beta_}; }
  std::vector<Buffer*> buffers() override { return {&running_mean_, &running_var_}; }
  int64_t forward_flops(std::span<const Shape>, const Shape& out) const override {
    return 2 * shape_numel(out);
  }

 private:
  float momentum_ = 0.1f, eps_ = 1e-5f;
  Parameter gamma_{"weight"};  // (C), PyTorch's name
  Parameter beta_{"bias"};     // (C)
  Buffer running_mean_{"running_mean"};  // (C)
  Buffer running_var_{"running_var"};    // (C)
  Tensor saved_mean_, saved_invstd_;     // (C) from the last training forward
};

}  // namespace

std::unique_ptr<Layer> make_batchnorm2d(const std::string& name, const LayerAttrs& attrs) {
  return std::make_unique<BatchNorm2d>(name, attrs);
}
CONVOY_REGISTER_LAYER(batchnorm2d, make_batchnorm2d);

}  // namespace convoy
