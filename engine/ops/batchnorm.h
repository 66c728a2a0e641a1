#pragma once
// batchnorm: per-channel normalization over (N, H, W) (PyTorch's BatchNorm2d; a 2-D (N, C)
// input is BatchNorm1d). gamma, beta, running_*, saved_*: (C) f32 whatever x's dtype.
#include "engine/core/tensor.h"

namespace convoy {

// x's channel count: dim 1 of a 4-D (N, C, H, W) or 2-D (N, C) tensor.
int64_t batchnorm_channels(const Tensor& x, const char* op);

// Argument checks for a backend on `device` (InternalError on failure); dx may be undefined.
void check_batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                                   const Tensor& running_mean, const Tensor& running_var, const Tensor& y,
                                   const Tensor& saved_mean, const Tensor& saved_invstd, Device device,
                                   const Tensor* residual = nullptr);
void check_batchnorm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& running_mean, const Tensor& running_var, float eps,
                                  const Tensor& y, Device device, const Tensor* residual = nullptr);
void check_batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                              const Tensor& saved_mean, const Tensor& saved_invstd, const Tensor& dx,
                              const Tensor& dgamma, const Tensor& dbeta, Device device,
                              const Tensor* relu_beta = nullptr);

}  // namespace convoy
