// BatchNorm2d: per-channel normalization with batch statistics in training and running
// statistics in evaluation (PyTorch semantics: momentum 0.1, eps 1e-5, unbiased running var).
// With StepInfo::sync_bn, training uses the statistics of every rank's batch together
// (PyTorch's SyncBatchNorm), built from the per-rank ops.
#include <cmath>
#include <variant>
#include <vector>

#include "engine/layers/batch_norm_fold.h"
#include "engine/layers/registry.h"
#include "engine/ops/conv2d.h"

namespace convoy {

namespace {

class BatchNorm2d final : public Layer {
 public:
  BatchNorm2d(const std::string& name, const LayerAttrs& a) : Layer(name) {
    // Finite: the reader refuses nan and inf.
    const double momentum = a.get_double("momentum", BatchNormSpec::kMomentum);
    const double eps = a.get_double("eps", BatchNormSpec::kEps);
    if (!(momentum >= 0 && momentum <= 1)) a.fail("momentum", "must be in [0, 1]");
    if (!(eps > 0 && eps <= 1)) a.fail("eps", "must be positive (and at most 1)");
    momentum_ = static_cast<float>(momentum);
    eps_ = static_cast<float>(eps);
    if (eps_ <= 0) a.fail("eps", "must be positive (" + std::to_string(eps) + " is 0 as a float)");
  }

  std::vector<OpKind> ops() const override { return {OpKind::batchnorm_forward_train, OpKind::batchnorm_forward_eval, OpKind::batchnorm_backward}; }

  LayerSpec spec() const override { return BatchNormSpec{.eps = eps_, .momentum = momentum_}; }

  bool fuse_relu(bool on) override {
    relu_ = on;
    return true;
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
    if (folded_.conv) return run_folded(be, in[0], nullptr, relu_, step);
    return run(be, in[0], nullptr, relu_, step);
  }

  bool adds_residual() const override { return true; }
  Tensor forward_adding(Backend& be, std::span<const Tensor> in, const Tensor& residual, bool relu,
                        const StepInfo& step) override {
    if (folded_.conv) return run_folded(be, in[0], &residual, relu, step);
    return run(be, in[0], &residual, relu, step);
  }

  // bn(conv(x)) = conv(x, w * s) + (conv bias * s + beta - mean * s), s = gamma / sqrt(var + eps)
  // per output channel (batch_norm_fold.h); the scaled weights in the convolution's compute dtype
  // and layout.
  void unfold_conv() override { folded_ = Folded{}; }
  bool fold_conv(Backend& be, Layer& conv) override {
    folded_ = Folded{};
    const LayerSpec spec = conv.spec();
    const auto* c = std::get_if<Conv2dSpec>(&spec);
    if (!c) return false;
    const std::vector<Parameter*> params = conv.parameters();
    const Parameter& weight = *params[0];
    const int64_t k = c->out_channels;
    std::vector<float> w = weight.value.to_floats();  // (K, C, R, S): each output channel's block in turn
    std::vector<float> bias = c->bias ? params[1]->value.to_floats() : std::vector<float>(static_cast<size_t>(k), 0.f);
    fold_batch_norm(batch_norm_affine(*this), w, bias);
    const Tensor& compute = weight.weight();
    folded_.weight = be.empty(compute.shape(), compute.dtype(), compute.layout());
    be.ops().cast(be.upload(Tensor::from_floats(w, weight.value.shape())), folded_.weight);
    folded_.bias = be.upload(Tensor::from_floats(bias, {k}));
    folded_.params = c->params;
    folded_.conv = &conv;
    return true;
  }

  std::vector<Tensor> backward(Backend& be, std::span<const Tensor> in, const Tensor&,
                               const Tensor& dy, std::span<const bool>) override {
    const Tensor& x = in[0];
    // cuDNN and oneDNN compute dx together with dgamma and dbeta, so dx is always made.
    Tensor dx = be.empty(x.shape(), x.dtype(), x.layout());
    be.ops().batchnorm_backward(x, dy, gamma_.value, saved_mean_, saved_invstd_, dx, gamma_.grad, beta_.grad,
                                relu_ ? &beta_.value : nullptr);
    if (sync_ && sync_->ranks() > 1) correct_synced_dx(be, x, dx);
    return {dx};
  }

  std::vector<Parameter*> parameters() override { return {&gamma_, &beta_}; }
  std::vector<Buffer*> buffers() override { return {&running_mean_, &running_var_}; }
  int64_t forward_flops(std::span<const Shape>, const Shape& out) const override {
    return 2 * shape_numel(out);
  }

 private:
  float momentum_ = 0, eps_ = 0;  // read by the constructor
  bool relu_ = false;          // a ReLU fused after it (fuse_relu)
  Parameter gamma_{"weight"};  // (C), PyTorch's name
  Parameter beta_{"bias"};     // (C)
  Buffer running_mean_{"running_mean"};  // (C)
  Buffer running_var_{"running_var"};    // (C)
  Tensor saved_mean_, saved_invstd_;     // (C) from the last training forward
  BatchStatsSync* sync_ = nullptr;       // the last training forward's
  std::vector<double> mean_, invstd_;    // (C) its global statistics, when synchronized

  // The convolution this batch norm took over (fold_conv), its folded weights and bias.
  struct Folded {
    Layer* conv = nullptr;
    Conv2dParams params;
    Tensor weight, bias;  // (K, C, R, S) in the convolution's compute dtype and layout; (K) f32
  } folded_;

  static int64_t per_channel(const Tensor& x) { return x.numel() / x.dim(1); }

  // x is the folded convolution's input: one fused op where the backend has it, else the
  // convolution and this batch norm as they are (the same results, in two passes).
  Tensor run_folded(Backend& be, const Tensor& x, const Tensor* residual, bool relu, const StepInfo& step) {
    if (step.training) throw std::logic_error("batch norm " + name() + " is folded into its convolution: inference only");
    Tensor y = be.empty(conv2d_output_shape(folded_.params, x.shape(), folded_.weight.shape()), x.dtype(), x.layout());
    if (be.ops().conv2d_forward_fused(folded_.params, x, folded_.weight, folded_.bias, residual, relu, y)) return y;
    const Tensor conv_out = folded_.conv->forward(be, std::span<const Tensor>(&x, 1), step);
    return run(be, conv_out, residual, relu, step);
  }

  // y = bn(x) (+ residual), then a ReLU where `relu`.
  Tensor run(Backend& be, const Tensor& x, const Tensor* residual, bool relu, const StepInfo& step) {
    Tensor y = be.empty(x.shape(), x.dtype(), x.layout());  // (N, C, H, W)
    sync_ = step.training ? step.sync_bn : nullptr;
    if (sync_ && sync_->ranks() > 1) {
      forward_synced(be, x, y);  // relu_ included
      if (residual) be.ops().add(y, *residual, y, relu);
    } else if (step.training) {
      const Shape c{x.dim(1)};
      saved_mean_ = be.empty(c, DType::f32);    // (C)
      saved_invstd_ = be.empty(c, DType::f32);  // (C)
      be.ops().batchnorm_forward_train(x, gamma_.value, beta_.value, momentum_, eps_, running_mean_.value,
                                       running_var_.value, y, saved_mean_, saved_invstd_, relu, residual);
    } else {
      be.ops().batchnorm_forward_eval(x, gamma_.value, beta_.value, running_mean_.value, running_var_.value, eps_, y,
                                      relu, residual);
    }
    return y;
  }

  // The batch's statistics over every rank: each rank's mean and biased variance (from the
  // ordinary training op, whose running update momentum 0 leaves alone) are combined over the
  // ranks (host-side: two small blocking collectives per layer, so sync_batchnorm costs speed);
  // the batch is then normalized with them (the evaluation op), and the running statistics move
  // as one process would move them on the whole batch.
  void forward_synced(Backend& be, const Tensor& x, Tensor& y) {
    const int64_t c = x.dim(1);
    const auto n = static_cast<double>(per_channel(x));
    Tensor local_mean = be.empty({c}, DType::f32), local_invstd = be.empty({c}, DType::f32);  // (C)
    be.ops().batchnorm_forward_train(x, gamma_.value, beta_.value, 0.0f, eps_, running_mean_.value,
                                     running_var_.value, y, local_mean, local_invstd);
    const std::vector<float> m = local_mean.to_floats(), is = local_invstd.to_floats();
    // Two rounds, the mean first, so that the variance sums squares about the global mean (no
    // E[x^2] - mean^2 cancellation in the f32 sums).
    std::vector<double> sums(static_cast<size_t>(c + 1));
    for (int64_t k = 0; k < c; ++k) sums[k] = n * m[k];
    sums[c] = n;
    sums = sync_->sum(sums);
    const double total = sums[c];
    mean_.assign(c, 0);
    invstd_.assign(c, 0);
    for (int64_t k = 0; k < c; ++k) mean_[k] = sums[k] / total;
    std::vector<double> squares(static_cast<size_t>(c));
    for (int64_t k = 0; k < c; ++k) {
      const double var = std::max(0.0, 1.0 / (static_cast<double>(is[k]) * is[k]) - eps_);
      squares[k] = n * (var + (m[k] - mean_[k]) * (m[k] - mean_[k]));
    }
    squares = sync_->sum(squares);
    std::vector<float> mean(c), var(c), rm = running_mean_.value.to_floats(), rv = running_var_.value.to_floats();
    for (int64_t k = 0; k < c; ++k) {
      const double v = squares[k] / total;
      invstd_[k] = 1.0 / std::sqrt(v + eps_);
      mean[k] = static_cast<float>(mean_[k]);
      var[k] = static_cast<float>(v);
      rm[k] = static_cast<float>((1.0 - momentum_) * rm[k] + momentum_ * mean_[k]);
      rv[k] = static_cast<float>((1.0 - momentum_) * rv[k] + momentum_ * v * total / std::max(1.0, total - 1));
    }
    running_mean_.value.copy_from(Tensor::from_floats(rm, {c}));
    running_var_.value.copy_from(Tensor::from_floats(rv, {c}));
    saved_mean_ = be.upload(Tensor::from_floats(mean, {c}));
    std::vector<float> invstd(c);
    for (int64_t k = 0; k < c; ++k) invstd[k] = static_cast<float>(invstd_[k]);
    saved_invstd_ = be.upload(Tensor::from_floats(invstd, {c}));
    be.ops().batchnorm_forward_eval(x, gamma_.value, beta_.value, saved_mean_, be.upload(Tensor::from_floats(var, {c})),
                                    eps_, y, relu_);
  }

  // The per-rank backward op computes dx with this rank's sums of dy and dy * xhat over its n
  // samples; the whole batch's gradient uses the sums over all N. The difference is per channel
  // affine in x, c1 x + c0, added with the evaluation op (gamma c1, beta c0, mean 0, var 1 - eps).
  // dgamma and dbeta stay this rank's: the gradient averaging sums them like any other.
  void correct_synced_dx(Backend& be, const Tensor& x, Tensor& dx) {
    const int64_t c = x.dim(1);
    const auto n = static_cast<double>(per_channel(x));
    const std::vector<float> db = beta_.grad.to_floats(), dg = gamma_.grad.to_floats(), g = gamma_.value.to_floats();
    std::vector<double> sums(static_cast<size_t>(2 * c + 1));
    for (int64_t k = 0; k < c; ++k) sums[k] = db[k], sums[c + k] = dg[k];
    sums[2 * c] = n;
    sums = sync_->sum(sums);
    const double total = sums[2 * c];
    std::vector<float> c1(c), c0(c), zero(c, 0.0f), one(c, static_cast<float>(1.0 - eps_));
    for (int64_t k = 0; k < c; ++k) {
      const double a = db[k] / n - sums[k] / total, b = dg[k] / n - sums[c + k] / total;
      const double slope = g[k] * invstd_[k] * invstd_[k] * b;
      c1[k] = static_cast<float>(slope);
      c0[k] = static_cast<float>(g[k] * invstd_[k] * a - slope * mean_[k]);
    }
    Tensor correction = be.empty(x.shape(), x.dtype(), x.layout());
    be.ops().batchnorm_forward_eval(x, be.upload(Tensor::from_floats(c1, {c})), be.upload(Tensor::from_floats(c0, {c})),
                                    be.upload(Tensor::from_floats(zero, {c})), be.upload(Tensor::from_floats(one, {c})),
                                    eps_, correction);
    be.ops().add_inplace(dx, correction);
  }
};

}  // namespace

std::unique_ptr<Layer> make_batchnorm2d(const std::string& name, const LayerAttrs& attrs) {
  return std::make_unique<BatchNorm2d>(name, attrs);
}
CONVOY_REGISTER_LAYER(make_batchnorm2d, BatchNormSpec{});

}  // namespace convoy
