#include "engine/ops/batchnorm.h"

#include "engine/core/error.h"
#include "engine/ops/op_check.h"

namespace convoy {

int64_t batchnorm_channels(const Tensor& x, const char* op) {
  if (x.ndim() != 4 && x.ndim() != 2)
    throw InternalError(std::string(op) + ": x must be (N, C, H, W) or (N, C), got " + describe(x));
  return x.dim(1);
}

void check_batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                                   const Tensor& running_mean, const Tensor& running_var, const Tensor& y,
                                   const Tensor& saved_mean, const Tensor& saved_invstd, Device device,
                                   const Tensor* residual) {
  const OpCheck c("batchnorm_forward_train", device);
  c.floating(x, "x").floating(y, "y").like(x, "x", y, "y");
  if (residual) c.here(*residual, "residual").like(x, "x", *residual, "residual");
  c.per_channel(batchnorm_channels(x, c.op()), {{gamma, "gamma"}, {beta, "beta"}, {running_mean, "running_mean"},
                                               {running_var, "running_var"}, {saved_mean, "saved_mean"},
                                               {saved_invstd, "saved_invstd"}});
  c.that(eps > 0.f, "eps must be positive");
}

void check_batchnorm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& running_mean, const Tensor& running_var, float eps,
                                  const Tensor& y, Device device, const Tensor* residual) {
  const OpCheck c("batchnorm_forward_eval", device);
  c.floating(x, "x").floating(y, "y").like(x, "x", y, "y");
  if (residual) c.here(*residual, "residual").like(x, "x", *residual, "residual");
  c.per_channel(batchnorm_channels(x, c.op()), {{gamma, "gamma"}, {beta, "beta"}, {running_mean, "running_mean"},
                                               {running_var, "running_var"}});
  c.that(eps > 0.f, "eps must be positive");
}

void check_batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                              const Tensor& saved_mean, const Tensor& saved_invstd, const Tensor& dx,
                              const Tensor& dgamma, const Tensor& dbeta, Device device,
                              const Tensor* relu_beta) {
  const OpCheck c("batchnorm_backward", device);
  c.floating(x, "x").floating(dy, "dy").like(x, "x", dy, "dy");
  c.per_channel(batchnorm_channels(x, c.op()), {{gamma, "gamma"}, {saved_mean, "saved_mean"},
                                               {saved_invstd, "saved_invstd"}, {dgamma, "dgamma"},
                                               {dbeta, "dbeta"}});
  if (relu_beta) c.per_channel(batchnorm_channels(x, c.op()), {{*relu_beta, "relu_beta"}});
  if (dx.defined()) c.here(dx, "dx").like(x, "x", dx, "dx");
}

}  // namespace convoy
