// batchnorm on oneDNN: training and inference forward, backward (plain nchw or nc).
#include <cmath>
#include <string>

#include "engine/backends/cpu/cpu_ops.h"
#include "engine/backends/cpu/cpu_loops.h"
#include "engine/backends/cpu/cpu_primitives.h"
#include "engine/backends/cpu/onednn_compat.h"
#include "engine/core/error.h"

namespace convoy::cpu {

namespace {

using dnnl::normalization_flags;
using dnnl::prop_kind;

// x (N, C, H, W) or (N, C), already checked; returns its oneDNN descriptor.
Md bn_data_md(const char* op, const Tensor& x) {
  if (x.numel() == 0) OpCheck(op, Device::cpu()).fail("empty x " + describe(x));
  const Shape& s = x.shape();
  if (s.size() == 4) return f32_md({s[0], s[1], s[2], s[3]}, Tag::nchw);
  return f32_md({s[0], s[1]}, Tag::nc);
}

std::string bn_key(const char* op, const Shape& s, float eps) {
  return key_of(op, {s[0], s[1], s.size() == 4 ? s[2] : 1, s.size() == 4 ? s[3] : 1,
                     static_cast<int64_t>(s.size()), float_bits(eps)});
}

// What follows the batch norm, in place on y: the residual added where there is one (a join's
// add, fused in), then the fused ReLU.
void finish_bn(Tensor& y, bool relu, const Tensor* residual, int threads) {
  if (!relu && !residual) return;
  float* p = y.data<float>();
  const float* z = residual ? residual->data<float>() : nullptr;
  const int64_t n = y.numel();
#pragma omp parallel for num_threads(team(threads)) if (n >= kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = z ? p[i] + z[i] : p[i];
    p[i] = relu && !(v > 0.f) ? 0.f : v;
  }
}

// dy of relu(bn(x)) -> dy of bn(x): zero where bn(x) = x scale + shift <= 0, with the scale and
// shift the forward used (the CUDA kernels compute the mask the same way).
Tensor relu_masked(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& beta,
                   const Tensor& mean, const Tensor& invstd, int threads) {
  Tensor g = Tensor::empty(dy.shape());
  const int64_t c = x.dim(1), inner = x.ndim() == 4 ? x.dim(2) * x.dim(3) : 1;
  const int64_t planes = x.numel() / inner;  // (n, channel) pairs
  const float *px = x.data<float>(), *pd = dy.data<float>();
  const float *pg = gamma.data<float>(), *pb = beta.data<float>(), *pm = mean.data<float>(), *pi = invstd.data<float>();
  float* out = g.data<float>();
#pragma omp parallel for num_threads(team(threads)) if (x.numel() >= kParallelMin) schedule(static)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const int64_t ch = plane % c;
    const float scale = pg[ch] * pi[ch], shift = pb[ch] - pm[ch] * scale;
    const int64_t base = plane * inner;
    for (int64_t i = base; i < base + inner; ++i) out[i] = px[i] * scale + shift > 0.f ? pd[i] : 0.f;
  }
  return g;
}

}  // namespace

void CpuOps::batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                     float momentum, float eps, Tensor& running_mean,
                                     Tensor& running_var, Tensor& y, Tensor& saved_mean,
                                     Tensor& saved_invstd, bool relu, const Tensor* residual) {
  constexpr const char* op = "batchnorm_forward_train";
  check_batchnorm_forward_train(x, gamma, beta, eps, running_mean, running_var, y, saved_mean,
                                saved_invstd, Device::cpu(), residual);
  require_supported(OpKind::batchnorm_forward_train, {{x, "x"}, {y, "y"}});
  const Md md = bn_data_md(op, x);
  const int64_t c = x.dim(1);
  const int64_t count = x.numel() / c;  // values per channel
  if (count < 2)
    throw InputError("batch norm in training needs more than one value per channel, got input " +
                     shape_str(x.shape()));
  guarded(
      op, [&] { return "x " + shape_str(x.shape()); },
      [&] {
        const Cached& cp = cached(bn_key(op, x.shape(), eps), [&] {
          return Cached{dnnl::batch_normalization_forward(onednn::bnorm_forward_pd(
              engine_, prop_kind::forward_training, md, eps,
              normalization_flags::use_scale | normalization_flags::use_shift))};
        });
        const Md cmd = f32_md({c}, Tag::a);
        // The batch variance lands in saved_invstd and is turned into 1/std below.
        execute(cp, {{DNNL_ARG_SRC, wrap(md, x)},
                     {DNNL_ARG_DST, wrap(md, y)},
                     {DNNL_ARG_SCALE, wrap(cmd, gamma)},
                     {DNNL_ARG_SHIFT, wrap(cmd, beta)},
                     {DNNL_ARG_MEAN, wrap(cmd, saved_mean)},
                     {DNNL_ARG_VARIANCE, wrap(cmd, saved_invstd)}});
      });
  const float* mean = saved_mean.data<float>();
  float* invstd = saved_invstd.data<float>();
  float* rm = running_mean.data<float>();
  float* rv = running_var.data<float>();
  const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
  for (int64_t i = 0; i < c; ++i) {
    const double var = invstd[i];
    rm[i] = static_cast<float>((1.0 - momentum) * rm[i] + momentum * static_cast<double>(mean[i]));
    rv[i] = static_cast<float>((1.0 - momentum) * rv[i] + momentum * var * unbias);
    invstd[i] = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps)));
  }
  finish_bn(y, relu, residual, threads_);
}

void CpuOps::batchnorm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    const Tensor& running_mean, const Tensor& running_var,
                                    float eps, Tensor& y, bool relu, const Tensor* residual) {
  constexpr const char* op = "batchnorm_forward_eval";
  check_batchnorm_forward_eval(x, gamma, beta, running_mean, running_var, eps, y, Device::cpu(), residual);
  require_supported(OpKind::batchnorm_forward_eval, {{x, "x"}, {y, "y"}});
  const Md md = bn_data_md(op, x);
  const int64_t c = x.dim(1);
  guarded(
      op, [&] { return "x " + shape_str(x.shape()); },
      [&] {
        const Cached& cp = cached(bn_key(op, x.shape(), eps), [&] {
          return Cached{dnnl::batch_normalization_forward(onednn::bnorm_forward_pd(
              engine_, prop_kind::forward_inference, md, eps,
              normalization_flags::use_global_stats | normalization_flags::use_scale |
                  normalization_flags::use_shift))};
        });
        const Md cmd = f32_md({c}, Tag::a);
        execute(cp, {{DNNL_ARG_SRC, wrap(md, x)},
                     {DNNL_ARG_DST, wrap(md, y)},
                     {DNNL_ARG_SCALE, wrap(cmd, gamma)},
                     {DNNL_ARG_SHIFT, wrap(cmd, beta)},
                     {DNNL_ARG_MEAN, wrap(cmd, running_mean)},
                     {DNNL_ARG_VARIANCE, wrap(cmd, running_var)}});
      });
  finish_bn(y, relu, residual, threads_);
}

void CpuOps::batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx,
                                Tensor& dgamma, Tensor& dbeta, const Tensor* relu_beta) {
  constexpr const char* op = "batchnorm_backward";
  check_batchnorm_backward(x, dy, gamma, saved_mean, saved_invstd, dx, dgamma, dbeta,
                           Device::cpu(), relu_beta);
  if (relu_beta) {
    const Tensor masked = relu_masked(x, dy, gamma, *relu_beta, saved_mean, saved_invstd, threads_);
    batchnorm_backward(x, masked, gamma, saved_mean, saved_invstd, dx, dgamma, dbeta, nullptr);
    return;
  }
  // oneDNN computes dx together with dgamma and dbeta, so it needs somewhere to put it.
  if (!dx.defined())
    OpCheck(op, Device::cpu()).fail("dx is undefined; the CPU path always computes it");
  require_supported(OpKind::batchnorm_backward, {{x, "x"}, {dy, "dy"}, {dx, "dx"}});
  const Md md = bn_data_md(op, x);
  const int64_t c = x.dim(1);
  // The op set saves 1/sqrt(var + eps), not eps; oneDNN wants a variance and an epsilon, so
  // hand it var' = 1/invstd^2 with epsilon 0, which gives back 1/std to within rounding.
  bn_variance_.resize(static_cast<size_t>(c));
  const float* invstd = saved_invstd.data<float>();
  for (int64_t i = 0; i < c; ++i) {
    const double s = invstd[i];
    bn_variance_[i] = static_cast<float>(1.0 / (s * s));
  }
  guarded(
      op, [&] { return "x " + shape_str(x.shape()); },
      [&] {
        const Cached& cp = cached(bn_key(op, x.shape(), 0.0f), [&] {
          const auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
          const auto hint =
              onednn::bnorm_forward_pd(engine_, prop_kind::forward_training, md, 0.0f, flags);
          const auto pd =
              onednn::bnorm_backward_pd(engine_, prop_kind::backward, md, md, 0.0f, flags, hint);
          Cached entry{dnnl::batch_normalization_backward(pd)};
          entry.takes_shift = onednn::kBnormBackwardTakesShift;
          return entry;
        });
        const Md cmd = f32_md({c}, Tag::a);
        std::unordered_map<int, dnnl::memory> args{
            {DNNL_ARG_SRC, wrap(md, x)},
            {DNNL_ARG_DIFF_DST, wrap(md, dy)},
            {DNNL_ARG_SCALE, wrap(cmd, gamma)},
            {DNNL_ARG_MEAN, wrap(cmd, saved_mean)},
            {DNNL_ARG_VARIANCE, dnnl::memory(cmd, engine_, bn_variance_.data())},
            {DNNL_ARG_DIFF_SRC, wrap(md, dx)},
            {DNNL_ARG_DIFF_SCALE, wrap(cmd, dgamma)},
            {DNNL_ARG_DIFF_SHIFT, wrap(cmd, dbeta)}};
        bn_shift_.assign(static_cast<size_t>(c), 0.0f);  // never read by the math
        const dnnl::memory shift(cmd, engine_, bn_shift_.data());
        if (cp.takes_shift) args.emplace(DNNL_ARG_SHIFT, shift);
        try {
          execute(cp, args);
        } catch (const dnnl::error& e) {
          if (e.status != dnnl_invalid_arguments) throw;
          // This oneDNN counts the shift the other way (see onednn_compat.h): flip and retry.
          cp.takes_shift = !cp.takes_shift;
          if (cp.takes_shift) args.emplace(DNNL_ARG_SHIFT, shift);
          else args.erase(DNNL_ARG_SHIFT);
          execute(cp, args);
        }
      });
}

}  // namespace convoy::cpu
