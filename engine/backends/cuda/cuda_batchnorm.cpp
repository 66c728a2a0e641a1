// CudaOps batch norm: cuDNN for nchw until it refuses a dtype, Convoy's kernels otherwise.
#include "engine/backends/cuda/cuda_ops.h"

#include <cstdio>
#include <string>

#include "engine/backends/cuda/cudnn_cublas_check.h"
#include "engine/backends/cuda/cuda_ops_internal.h"
#include "kernels/batchnorm.cuh"

namespace convoy::cuda {

namespace {

// 4-D (N, C, H, W) as is; 2-D (N, C) as (N, C, 1, 1) (the batch-norm checks allow no other rank).
Dims4 dims4(const Tensor& t) {
  if (t.ndim() == 4) return {t.dim(0), t.dim(1), t.dim(2), t.dim(3)};
  return {t.dim(0), t.dim(1), 1, 1};
}

// cuDNN refused this configuration: Convoy's kernels do it instead.
bool cudnn_refused(cudnnStatus_t st) {
  return st == CUDNN_STATUS_NOT_SUPPORTED || st == CUDNN_STATUS_BAD_PARAM;
}

// With CudaTunables::verbose, one line on stderr when batch norm leaves cuDNN for a dtype.
void note_bn_fallback(const char* op, bool verbose, DType dt, cudnnStatus_t st) {
  if (verbose)
    std::fprintf(stderr, "convoy: %s: cuDNN refused %s (%s); Convoy's batch-norm kernels take over\n",
                 op, std::string(dtype_name(dt)).c_str(), cudnnGetErrorString(st));
}

// Runs `call(x_desc, bn_desc)`, a cuDNN batch-norm call on x's descriptors. True when cuDNN did
// the work; false when it refused x's dtype, which `kernels_only` then remembers for the
// dtype, so that Convoy's kernels take over from now on (said on stderr when `verbose`).
template <class Call>
bool run_cudnn_batchnorm(const char* op, bool verbose, const Tensor& x, bool& kernels_only, Call&& call) {
  TensorDesc xd, bd;
  xd.set(dims4(x), x.dtype(), x.layout());
  CONVOY_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(bd.d, xd.d, CUDNN_BATCHNORM_SPATIAL));
  const cudnnStatus_t st = call(xd.d, bd.d);
  if (st == CUDNN_STATUS_SUCCESS) return true;
  if (!cudnn_refused(st)) CONVOY_CUDNN_CHECK(st);
  note_bn_fallback(op, verbose, x.dtype(), st);
  kernels_only = true;
  return false;
}
}  // namespace

void CudaOps::batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                      float momentum, float eps, Tensor& running_mean,
                                      Tensor& running_var, Tensor& y, Tensor& saved_mean,
                                      Tensor& saved_invstd, bool relu, const Tensor* residual) {
  const char* op = "batchnorm_forward_train";
  check_batchnorm_forward_train(x, gamma, beta, eps, running_mean, running_var, y, saved_mean, saved_invstd,
                                device(), residual);
  require_supported(OpKind::batchnorm_forward_train, x);
  // cuDNN's running update is running = (1 - f) running + f batch with the unbiased
  // variance, f = exponentialAverageFactor: PyTorch's momentum exactly. A fused ReLU takes
  // Convoy's kernels, whose backward recomputes the mask the same way; so does a residual.
  if (!relu && !residual && use_cudnn_bn(x) &&
      run_cudnn_batchnorm(op, ctx_.tunables.verbose, x, bn_kernels_only_[static_cast<int>(x.dtype())],
                          [&](cudnnTensorDescriptor_t xd, cudnnTensorDescriptor_t bd) {
                            return cudnnBatchNormalizationForwardTraining(
                                ctx_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, xd, x.raw(), xd, y.raw(), bd,
                                gamma.raw(), beta.raw(), momentum, running_mean.raw(), running_var.raw(), eps,
                                saved_mean.raw(), saved_invstd.raw());
                          }))
    return;
  const ChannelView v = channel_view(x);
  void* scratch = scratch_.get(kernels::batchnorm_scratch_bytes(v.outer, v.channels, v.inner));
  kernels::batchnorm_forward_train(dt_of(x.dtype()), x.raw(), gamma.data<float>(), beta.data<float>(),
                                   momentum, eps, running_mean.data<float>(),
                                   running_var.data<float>(), y.raw(), saved_mean.data<float>(),
                                   saved_invstd.data<float>(), v.outer, v.channels, v.inner,
                                   scratch, ctx_.stream, relu, residual ? residual->raw() : nullptr);
}

void CudaOps::batchnorm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                     const Tensor& running_mean, const Tensor& running_var,
                                     float eps, Tensor& y, bool relu, const Tensor* residual) {
  const char* op = "batchnorm_forward_eval";
  check_batchnorm_forward_eval(x, gamma, beta, running_mean, running_var, eps, y, device(), residual);
  require_supported(OpKind::batchnorm_forward_eval, x);
  if (!relu && !residual && use_cudnn_bn(x) &&
      run_cudnn_batchnorm(op, ctx_.tunables.verbose, x, bn_kernels_only_[static_cast<int>(x.dtype())],
                          [&](cudnnTensorDescriptor_t xd, cudnnTensorDescriptor_t bd) {
                            return cudnnBatchNormalizationForwardInference(
                                ctx_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, xd, x.raw(), xd, y.raw(), bd,
                                gamma.raw(), beta.raw(), running_mean.raw(), running_var.raw(), eps);
                          }))
    return;
  const ChannelView v = channel_view(x);
  kernels::batchnorm_forward_eval(dt_of(x.dtype()), x.raw(), gamma.data<float>(), beta.data<float>(),
                                  running_mean.data<float>(), running_var.data<float>(), eps,
                                  y.raw(), v.outer, v.channels, v.inner, ctx_.stream, relu,
                                  residual ? residual->raw() : nullptr);
}

void CudaOps::batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                 const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx,
                                 Tensor& dgamma, Tensor& dbeta, const Tensor* relu_beta) {
  const char* op = "batchnorm_backward";
  check_batchnorm_backward(x, dy, gamma, saved_mean, saved_invstd, dx, dgamma, dbeta, device(), relu_beta);
  require_supported(OpKind::batchnorm_backward, x);
  // With the saved statistics given, cuDNN does not recompute them, so the forward eps is
  // not needed; any valid value goes here.
  if (!relu_beta && use_cudnn_bn(x) && dx.defined() &&
      run_cudnn_batchnorm(op, ctx_.tunables.verbose, x, bn_kernels_only_[static_cast<int>(x.dtype())],
                          [&](cudnnTensorDescriptor_t xd, cudnnTensorDescriptor_t bd) {
                            return cudnnBatchNormalizationBackward(
                                ctx_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, &kOne, &kZero, xd, x.raw(), xd,
                                dy.raw(), xd, dx.raw(), bd, gamma.raw(), dgamma.raw(), dbeta.raw(), 1e-5,
                                saved_mean.raw(), saved_invstd.raw());
                          }))
    return;
  const ChannelView v = channel_view(x);
  void* scratch = scratch_.get(kernels::batchnorm_scratch_bytes(v.outer, v.channels, v.inner));
  kernels::batchnorm_backward(dt_of(x.dtype()), x.raw(), dy.raw(), gamma.data<float>(),
                              saved_mean.data<float>(), saved_invstd.data<float>(),
                              dx.defined() ? dx.raw() : nullptr, dgamma.data<float>(),
                              dbeta.data<float>(), v.outer, v.channels, v.inner, scratch,
                              ctx_.stream, relu_beta ? relu_beta->data<float>() : nullptr);
}

}  // namespace convoy::cuda
