// The CPU ops backed by oneDNN: convolution, batch norm, eltwise, pooling, inner product.
// Plain formats (nchw, oihw/goihw, nc, oi) so tensors are used in place with no reorders.
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <string>

#include "engine/backends/cpu/cpu_ops.h"
#include "engine/backends/cpu/onednn_compat.h"
#include "engine/core/error.h"

namespace convoy::cpu {

namespace {

using dnnl::algorithm;
using dnnl::normalization_flags;
using dnnl::prop_kind;
using Md = dnnl::memory::desc;
using Dims = dnnl::memory::dims;
using Tag = dnnl::memory::format_tag;
using Dt = dnnl::memory::data_type;

// Beyond this many cached primitives (e.g. inference over ever-changing batch sizes) the
// cache starts over rather than grow without bound.
constexpr size_t kMaxCachedPrimitives = 2048;

Md f32_md(const Dims& dims, Tag tag) { return Md(dims, Dt::f32, tag); }

std::string key_of(const char* op, std::initializer_list<int64_t> values) {
  std::string key(op);
  for (int64_t v : values) {
    key += ',';
    key += std::to_string(v);
  }
  return key;
}

int64_t float_bits(float v) { return std::bit_cast<uint32_t>(v); }

// Turns a oneDNN failure into a convoy::DeviceError naming the op and its shapes.
template <class Describe, class Body>
void guarded(const char* op, Describe&& describe, Body&& body) {
  try {
    body();
  } catch (const dnnl::error& e) {
    throw DeviceError(std::string("oneDNN failed in ") + op + " for " + describe() + ": " +
                      e.what() + " (status " + std::to_string(static_cast<int>(e.status)) + ")");
  }
}

// Sets OpenMP's thread count for the oneDNN call on this thread, and restores it after.
class OmpThreadsScope {
 public:
  explicit OmpThreadsScope(int threads) {
    if (threads > 0) {
      previous_ = omp_get_max_threads();
      if (previous_ != threads) omp_set_num_threads(threads);
      else previous_ = 0;
    }
  }
  ~OmpThreadsScope() {
    if (previous_ > 0) omp_set_num_threads(previous_);
  }
  OmpThreadsScope(const OmpThreadsScope&) = delete;
  OmpThreadsScope& operator=(const OmpThreadsScope&) = delete;

 private:
  int previous_ = 0;
};

// ---- convolution geometry -------------------------------------------------------------------

struct ConvGeom {
  int64_t n, c, h, w;  // x (N, C, H, W)
  int64_t k, r, s;     // w (K, C/groups, R, S)
  int64_t p, q;        // y (N, K, P, Q)
  int64_t groups;
};

std::string conv_str(const Conv2dParams& p) {
  return "stride (" + std::to_string(p.stride_h) + ", " + std::to_string(p.stride_w) + "), pad (" +
         std::to_string(p.pad_h) + ", " + std::to_string(p.pad_w) + "), dilation (" +
         std::to_string(p.dilation_h) + ", " + std::to_string(p.dilation_w) + "), groups " +
         std::to_string(p.groups);
}

// What oneDNN needs beyond check_conv2d_*: non-empty tensors and a kernel that fits the
// padded input. (conv2d_output_size rounds a negative span toward zero, so a kernel that
// overhangs by less than a stride passes the shared shape check with P = 1; at stride 1 the
// formula is exact.) x (N, C, H, W), w (K, C/groups, R, S), y (N, K, P, Q), already checked.
ConvGeom conv_geom(const char* op, const Conv2dParams& p, const Tensor& x, const Tensor& w,
                   const Tensor& y) {
  const OpCheck c(op, Device::cpu());
  c.that(x.dim(0) >= 1 && x.dim(1) >= 1 && w.dim(0) >= 1,
         "empty tensor: x " + describe(x) + ", w " + describe(w));
  c.that(conv2d_output_size(x.dim(2), w.dim(2), 1, p.pad_h, p.dilation_h) >= 1 &&
             conv2d_output_size(x.dim(3), w.dim(3), 1, p.pad_w, p.dilation_w) >= 1,
         "the kernel of " + describe(w) + " does not fit the padded input " + describe(x) + ", " +
             conv_str(p));
  return {x.dim(0), x.dim(1), x.dim(2), x.dim(3), w.dim(0), w.dim(2), w.dim(3),
          y.dim(2), y.dim(3), p.groups};
}

struct ConvDescs {
  Md x, w, b, y;
  Dims strides, dilates, pad_l, pad_r;
};

ConvDescs conv_descs(const ConvGeom& g, const Conv2dParams& p) {
  ConvDescs d;
  d.x = f32_md({g.n, g.c, g.h, g.w}, Tag::nchw);
  d.w = g.groups == 1 ? f32_md({g.k, g.c, g.r, g.s}, Tag::oihw)
                      : f32_md({g.groups, g.k / g.groups, g.c / g.groups, g.r, g.s}, Tag::goihw);
  d.b = f32_md({g.k}, Tag::a);
  d.y = f32_md({g.n, g.k, g.p, g.q}, Tag::nchw);
  d.strides = {p.stride_h, p.stride_w};
  d.dilates = {p.dilation_h - 1, p.dilation_w - 1};  // oneDNN counts the holes
  d.pad_l = {p.pad_h, p.pad_w};
  // P was checked against the symmetric formula (conv2d_output_shape), so the same right
  // padding is consistent.
  d.pad_r = {p.pad_h, p.pad_w};
  return d;
}

std::string conv_key(const char* op, const ConvGeom& g, const Conv2dParams& p, bool bias) {
  return key_of(op, {g.n, g.c, g.h, g.w, g.k, g.r, g.s, g.p, g.q, g.groups, p.stride_h, p.stride_w,
                     p.pad_h, p.pad_w, p.dilation_h, p.dilation_w, bias ? 1 : 0});
}

dnnl::convolution_forward::primitive_desc conv_forward_pd(const dnnl::engine& eng,
                                                          const ConvDescs& d, bool bias) {
  return onednn::conv_forward_pd(eng, prop_kind::forward_training, d.x, d.w, bias ? &d.b : nullptr,
                                 d.y, d.strides, d.dilates, d.pad_l, d.pad_r);
}

// ---- pooling geometry -----------------------------------------------------------------------

struct PoolGeom {
  int64_t n, c, h, w, p, q;
};

const char* pool_kind_name(PoolKind kind) {
  switch (kind) {
    case PoolKind::max: return "max";
    case PoolKind::avg: return "avg";
  }
  throw InternalError("unknown pool kind");
}

algorithm pool_algorithm(PoolKind kind) {
  switch (kind) {
    case PoolKind::max: return algorithm::pooling_max;
    case PoolKind::avg: return algorithm::pooling_avg_exclude_padding;  // PyTorch's default
  }
  throw InternalError("unknown pool kind");
}

std::string pool_str(const Pool2dParams& p) {
  return std::string(pool_kind_name(p.kind)) + " kernel (" +
         std::to_string(p.kernel_h) + ", " + std::to_string(p.kernel_w) + "), stride (" +
         std::to_string(p.stride_h) + ", " + std::to_string(p.stride_w) + "), pad (" +
         std::to_string(p.pad_h) + ", " + std::to_string(p.pad_w) + ")";
}

// What oneDNN needs beyond check_pool2d_*: non-empty tensors and a window that fits the
// padded input (pool2d_output_shape rounds a negative span toward zero, like the conv formula;
// at stride 1 it is exact). x (N, C, H, W), y (N, C, P, Q), already checked.
PoolGeom pool_geom(const char* op, const Pool2dParams& p, const Tensor& x, const Tensor& y) {
  const OpCheck c(op, Device::cpu());
  // Every window then holds at least one real element (the average's divisor is never 0).
  c.that(p.pad_h < p.kernel_h && p.pad_w < p.kernel_w,
         "padding must be smaller than the kernel, got " + pool_str(p));
  c.that(x.dim(0) >= 1 && x.dim(1) >= 1, "empty tensor: x " + describe(x));
  Pool2dParams unit = p;
  unit.stride_h = unit.stride_w = 1;
  const Shape sweep = pool2d_output_shape(unit, x.shape());
  c.that(sweep[2] >= 1 && sweep[3] >= 1,
         "the window does not fit the padded input " + describe(x) + ", " + pool_str(p));
  return {x.dim(0), x.dim(1), x.dim(2), x.dim(3), y.dim(2), y.dim(3)};
}

struct PoolDescs {
  Md x, y;
  Dims strides, kernel, pad_l, pad_r;
  algorithm alg;
};

PoolDescs pool_descs(const PoolGeom& g, const Pool2dParams& p) {
  PoolDescs d;
  d.x = f32_md({g.n, g.c, g.h, g.w}, Tag::nchw);
  d.y = f32_md({g.n, g.c, g.p, g.q}, Tag::nchw);
  d.strides = {p.stride_h, p.stride_w};
  d.kernel = {p.kernel_h, p.kernel_w};
  d.pad_l = {p.pad_h, p.pad_w};
  d.pad_r = {p.pad_h, p.pad_w};
  d.alg = pool_algorithm(p.kind);
  return d;
}

std::string pool_key(const char* op, const PoolGeom& g, const Pool2dParams& p, bool training) {
  return key_of(op, {static_cast<int64_t>(p.kind), training ? 1 : 0, g.n, g.c, g.h, g.w, g.p, g.q,
                     p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.pad_h, p.pad_w});
}

dnnl::pooling_forward::primitive_desc pool_forward_pd(const dnnl::engine& eng, const PoolDescs& d,
                                                      bool training) {
  return onednn::pool_forward_pd(eng,
                                 training ? prop_kind::forward_training
                                          : prop_kind::forward_inference,
                                 d.alg, d.x, d.y, d.strides, d.kernel, d.pad_l, d.pad_r);
}

// ---- batch norm -----------------------------------------------------------------------------

// x (N, C, H, W) or (N, C), already checked; returns its oneDNN descriptor.
Md bn_data_md(const char* op, const Tensor& x) {
  OpCheck(op, Device::cpu()).that(x.numel() > 0, "empty x " + describe(x));
  const Shape& s = x.shape();
  if (s.size() == 4) return f32_md({s[0], s[1], s[2], s[3]}, Tag::nchw);
  return f32_md({s[0], s[1]}, Tag::nc);
}

std::string bn_key(const char* op, const Shape& s, float eps) {
  return key_of(op, {s[0], s[1], s.size() == 4 ? s[2] : 1, s.size() == 4 ? s[3] : 1,
                     static_cast<int64_t>(s.size()), float_bits(eps)});
}

// ---- eltwise --------------------------------------------------------------------------------

algorithm eltwise_alg(Activation kind) {
  switch (kind) {
    case Activation::relu:
    case Activation::leaky_relu: return algorithm::eltwise_relu;  // alpha = negative slope
    case Activation::gelu: return algorithm::eltwise_gelu_erf;
  }
  throw InternalError("unknown activation");
}

float eltwise_alpha(Activation kind, float alpha) {
  return kind == Activation::leaky_relu ? alpha : 0.0f;
}

}  // namespace

// ---- CpuOps plumbing ------------------------------------------------------------------------

CpuOps::CpuOps(const dnnl::engine& engine, const dnnl::stream& stream, int threads)
    : engine_(engine), stream_(stream), threads_(threads) {}

bool CpuOps::supports(OpKind op, DType dtype, Layout layout) const {
  const bool nchw = layout == Layout::nchw;
  switch (op) {
    // oneDNN primitives on plain f32 formats, and loops whose arithmetic is f32.
    case OpKind::conv2d_forward:
    case OpKind::conv2d_backward_data:
    case OpKind::conv2d_backward_weights:
    case OpKind::batchnorm_forward_train:
    case OpKind::batchnorm_forward_eval:
    case OpKind::batchnorm_backward:
    case OpKind::activation_forward:
    case OpKind::activation_backward:
    case OpKind::pool2d_forward:
    case OpKind::pool2d_backward:
    case OpKind::linear_forward:
    case OpKind::linear_backward:
    case OpKind::add:
    case OpKind::add_inplace:
    case OpKind::dropout_forward:
    case OpKind::dropout_backward:
    case OpKind::sgd_update:
    case OpKind::adamw_update: return dtype == DType::f32 && nchw;
    // Values copied or set as they are, whatever their dtype.
    case OpKind::concat_channels:
    case OpKind::split_channels:
    case OpKind::fill: return nchw;
    // The logits are read in any floating dtype and the loss is computed in double.
    case OpKind::softmax_cross_entropy:
    case OpKind::softmax: return is_floating(dtype) && nchw;
    // Converting between the layouts is part of cast's job.
    case OpKind::cast: return is_floating(dtype);
    // The dtype of the output; the input is u8.
    case OpKind::normalize_augment: return (dtype == DType::f32 || dtype == DType::bf16) && nchw;
  }
  return false;  // not an OpKind
}

void CpuOps::require_supported(OpKind op, std::initializer_list<NamedArg> tensors) const {
  for (const NamedArg& arg : tensors) {
    const Tensor& t = arg.tensor;
    if (!t.defined() || supports(op, t.dtype(), t.layout())) continue;
    const std::string name = op_name(op);
    std::string why;
    // A user who picked bf16 on a machine without a GPU lands here: say so in their terms.
    if (t.dtype() == DType::bf16 && supports(op, DType::f32, Layout::nchw))
      why = "bf16 is a GPU precision; the CPU path computes in f32";
    else if (supports(op, t.dtype(), Layout::nchw))
      why = "the CPU path uses nchw only";
    else
      why = "the CPU path does not run " + name + " on " + std::string(dtype_name(t.dtype()));
    throw DeviceError(name + ": " + arg.name + " is " + describe(t) + "; " + why);
  }
}

template <class Make>
const CpuOps::Cached& CpuOps::cached(const std::string& key, Make&& make) {
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  if (cache_.size() >= kMaxCachedPrimitives) cache_.clear();
  // oneDNN sizes its thread partitioning when it builds the primitive, so build it under the
  // same thread count it will run with.
  OmpThreadsScope scope(threads_);
  return cache_.emplace(key, make()).first->second;
}

void CpuOps::execute(const Cached& c, const std::unordered_map<int, dnnl::memory>& args) {
  OmpThreadsScope scope(threads_);
  c.prim.execute(stream_, args);
  stream_.wait();
}

dnnl::memory CpuOps::wrap(const dnnl::memory::desc& md, const Tensor& t) const {
  return dnnl::memory(md, engine_, const_cast<void*>(t.raw()));
}

// ---- convolution ----------------------------------------------------------------------------

void CpuOps::conv2d_forward(const Conv2dParams& p, const Tensor& x, const Tensor& w,
                            const Tensor& b, Tensor& y) {
  constexpr const char* op = "conv2d_forward";
  check_conv2d_forward(p, x, w, b, y, Device::cpu());
  require_supported(OpKind::conv2d_forward, {{x, "x"}, {w, "w"}, {b, "b"}, {y, "y"}});
  const ConvGeom g = conv_geom(op, p, x, w, y);
  const bool bias = b.defined();
  const ConvDescs d = conv_descs(g, p);
  guarded(
      op, [&] { return "x " + shape_str(x.shape()) + ", w " + shape_str(w.shape()) + ", " + conv_str(p); },
      [&] {
        const Cached& c = cached(conv_key(op, g, p, bias), [&] {
          return Cached{dnnl::convolution_forward(conv_forward_pd(engine_, d, bias))};
        });
        std::unordered_map<int, dnnl::memory> args{
            {DNNL_ARG_SRC, wrap(d.x, x)}, {DNNL_ARG_WEIGHTS, wrap(d.w, w)}, {DNNL_ARG_DST, wrap(d.y, y)}};
        if (bias) args.emplace(DNNL_ARG_BIAS, wrap(d.b, b));
        execute(c, args);
      });
}

void CpuOps::conv2d_backward_data(const Conv2dParams& p, const Tensor& dy, const Tensor& w,
                                  Tensor& dx) {
  constexpr const char* op = "conv2d_backward_data";
  check_conv2d_backward_data(p, dy, w, dx, Device::cpu());
  require_supported(OpKind::conv2d_backward_data, {{dy, "dy"}, {w, "w"}, {dx, "dx"}});
  const ConvGeom g = conv_geom(op, p, dx, w, dy);
  const ConvDescs d = conv_descs(g, p);
  guarded(
      op, [&] { return "dy " + shape_str(dy.shape()) + ", w " + shape_str(w.shape()) + ", dx " + shape_str(dx.shape()) + ", " + conv_str(p); },
      [&] {
        const Cached& c = cached(conv_key(op, g, p, false), [&] {
          const auto hint = conv_forward_pd(engine_, d, false);
          return Cached{dnnl::convolution_backward_data(onednn::conv_backward_data_pd(
              engine_, d.x, d.w, d.y, d.strides, d.dilates, d.pad_l, d.pad_r, hint))};
        });
        execute(c, {{DNNL_ARG_DIFF_DST, wrap(d.y, dy)},
                    {DNNL_ARG_WEIGHTS, wrap(d.w, w)},
                    {DNNL_ARG_DIFF_SRC, wrap(d.x, dx)}});
      });
}

void CpuOps::conv2d_backward_weights(const Conv2dParams& p, const Tensor& x, const Tensor& dy,
                                     Tensor& dw, Tensor& db) {
  constexpr const char* op = "conv2d_backward_weights";
  check_conv2d_backward_weights(p, x, dy, dw, db, Device::cpu());
  require_supported(OpKind::conv2d_backward_weights, {{x, "x"}, {dy, "dy"}, {dw, "dw"}, {db, "db"}});
  const ConvGeom g = conv_geom(op, p, x, dw, dy);
  const bool bias = db.defined();
  const ConvDescs d = conv_descs(g, p);
  guarded(
      op, [&] { return "x " + shape_str(x.shape()) + ", dy " + shape_str(dy.shape()) + ", dw " + shape_str(dw.shape()) + ", " + conv_str(p); },
      [&] {
        const Cached& c = cached(conv_key(op, g, p, bias), [&] {
          const auto hint = conv_forward_pd(engine_, d, bias);
          return Cached{dnnl::convolution_backward_weights(onednn::conv_backward_weights_pd(
              engine_, d.x, d.w, bias ? &d.b : nullptr, d.y, d.strides, d.dilates, d.pad_l,
              d.pad_r, hint))};
        });
        std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, wrap(d.x, x)},
                                                   {DNNL_ARG_DIFF_DST, wrap(d.y, dy)},
                                                   {DNNL_ARG_DIFF_WEIGHTS, wrap(d.w, dw)}};
        if (bias) args.emplace(DNNL_ARG_DIFF_BIAS, wrap(d.b, db));
        execute(c, args);
      });
}

// ---- batch norm -----------------------------------------------------------------------------

void CpuOps::batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                     float momentum, float eps, Tensor& running_mean,
                                     Tensor& running_var, Tensor& y, Tensor& saved_mean,
                                     Tensor& saved_invstd) {
  constexpr const char* op = "batchnorm_forward_train";
  check_batchnorm_forward_train(x, gamma, beta, eps, running_mean, running_var, y, saved_mean,
                                saved_invstd, Device::cpu());
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
}

void CpuOps::batchnorm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    const Tensor& running_mean, const Tensor& running_var,
                                    float eps, Tensor& y) {
  constexpr const char* op = "batchnorm_forward_eval";
  check_batchnorm_forward_eval(x, gamma, beta, running_mean, running_var, eps, y, Device::cpu());
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
}

void CpuOps::batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx,
                                Tensor& dgamma, Tensor& dbeta) {
  constexpr const char* op = "batchnorm_backward";
  check_batchnorm_backward(x, dy, gamma, saved_mean, saved_invstd, dx, dgamma, dbeta, Device::cpu());
  // oneDNN computes dx together with dgamma and dbeta, so it needs somewhere to put it.
  OpCheck(op, Device::cpu()).here(dx, "dx");
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

// ---- activations ----------------------------------------------------------------------------

void CpuOps::activation_forward(Activation kind, float alpha, const Tensor& x, Tensor& y) {
  constexpr const char* op = "activation_forward";
  check_activation_forward(x, y, Device::cpu());
  require_supported(OpKind::activation_forward, {{x, "x"}, {y, "y"}});
  if (x.numel() == 0) return;
  const Md md = f32_md({x.numel()}, Tag::a);
  const float a = eltwise_alpha(kind, alpha);
  guarded(
      op, [&] { return "x " + shape_str(x.shape()); },
      [&] {
        const Cached& c = cached(
            key_of(op, {static_cast<int64_t>(kind), float_bits(a), x.numel()}), [&] {
              return Cached{dnnl::eltwise_forward(onednn::eltwise_forward_pd(
                  engine_, prop_kind::forward_training, eltwise_alg(kind), md, a, 0.0f))};
            });
        execute(c, {{DNNL_ARG_SRC, wrap(md, x)}, {DNNL_ARG_DST, wrap(md, y)}});
      });
}

void CpuOps::activation_backward(Activation kind, float alpha, const Tensor& x, const Tensor& y,
                                 const Tensor& dy, Tensor& dx) {
  constexpr const char* op = "activation_backward";
  check_activation_backward(kind, alpha, x, y, dy, dx, Device::cpu());
  // oneDNN's eltwise backward reads x (the *_use_dst_for_bwd algorithms, which read y, are
  // not used), so x is needed even where the shared check would settle for y.
  OpCheck(op, Device::cpu()).here(x, "x");
  require_supported(OpKind::activation_backward, {{x, "x"}, {dy, "dy"}, {dx, "dx"}});
  if (x.numel() == 0) return;
  const Md md = f32_md({x.numel()}, Tag::a);
  const float a = eltwise_alpha(kind, alpha);
  guarded(
      op, [&] { return "x " + shape_str(x.shape()); },
      [&] {
        const Cached& c = cached(
            key_of(op, {static_cast<int64_t>(kind), float_bits(a), x.numel()}), [&] {
              const auto hint = onednn::eltwise_forward_pd(engine_, prop_kind::forward_training,
                                                           eltwise_alg(kind), md, a, 0.0f);
              return Cached{dnnl::eltwise_backward(
                  onednn::eltwise_backward_pd(engine_, eltwise_alg(kind), md, md, a, 0.0f, hint))};
            });
        execute(c, {{DNNL_ARG_SRC, wrap(md, x)},
                    {DNNL_ARG_DIFF_DST, wrap(md, dy)},
                    {DNNL_ARG_DIFF_SRC, wrap(md, dx)}});
      });
}

// ---- pooling --------------------------------------------------------------------------------

void CpuOps::pool2d_forward(const Pool2dParams& p, const Tensor& x, Tensor& y, Tensor& workspace,
                            bool training) {
  constexpr const char* op = "pool2d_forward";
  check_pool2d_forward(p, x, y, Device::cpu());
  require_supported(OpKind::pool2d_forward, {{x, "x"}, {y, "y"}});
  const PoolGeom g = pool_geom(op, p, x, y);
  const PoolDescs d = pool_descs(g, p);
  // Only max pooling keeps a record for backward; average pooling's backward needs none.
  const bool keep = training && p.kind == PoolKind::max;
  guarded(
      op, [&] { return "x " + shape_str(x.shape()) + ", " + pool_str(p); },
      [&] {
        const Cached& c = cached(pool_key(op, g, p, keep), [&] {
          const auto pd = pool_forward_pd(engine_, d, keep);
          if (!keep) return Cached{dnnl::pooling_forward(pd)};
          return Cached{dnnl::pooling_forward(pd), pd.workspace_desc(),
                        onednn::md_bytes(pd.workspace_desc())};
        });
        std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, wrap(d.x, x)},
                                                   {DNNL_ARG_DST, wrap(d.y, y)}};
        if (c.workspace_bytes > 0) {
          const int64_t bytes = static_cast<int64_t>(c.workspace_bytes);
          if (!workspace.defined() || workspace.dtype() != DType::u8 ||
              workspace.shape() != Shape{bytes} || !workspace.device().is_cpu())
            workspace = Tensor(Shape{bytes}, DType::u8, cpu_allocator());
          args.emplace(DNNL_ARG_WORKSPACE, dnnl::memory(c.workspace_md, engine_, workspace.raw()));
        }
        execute(c, args);
      });
}

void CpuOps::pool2d_rebuild_workspace(const Pool2dParams& p, const Tensor& x,
                                      const Shape& y_shape, Tensor& workspace) {
  Tensor y(y_shape, DType::f32, cpu_allocator());
  pool2d_forward(p, x, y, workspace, /*training=*/true);
}

void CpuOps::pool2d_backward(const Pool2dParams& p, const Tensor& x, const Tensor& y,
                             const Tensor& dy, const Tensor& workspace, Tensor& dx) {
  constexpr const char* op = "pool2d_backward";
  check_pool2d_backward(p, x, y, dy, dx, Device::cpu());
  require_supported(OpKind::pool2d_backward, {{x, "x"}, {y, "y"}, {dy, "dy"}, {dx, "dx"}});
  const PoolGeom g = pool_geom(op, p, x, dy);
  const PoolDescs d = pool_descs(g, p);
  const bool is_max = p.kind == PoolKind::max;
  guarded(
      op, [&] { return "dy " + shape_str(dy.shape()) + ", dx " + shape_str(dx.shape()) + ", " + pool_str(p); },
      [&] {
        Tensor ws = workspace;
        Md ws_md;
        if (is_max) {
          // The workspace must come from a training forward of this very shape; when the
          // caller kept none (e.g. the forward ran in inference mode), recompute it from x.
          const Cached& fwd = cached(pool_key("pool2d_forward", g, p, true), [&] {
            const auto pd = pool_forward_pd(engine_, d, true);
            return Cached{dnnl::pooling_forward(pd), pd.workspace_desc(),
                          onednn::md_bytes(pd.workspace_desc())};
          });
          ws_md = fwd.workspace_md;
          const bool usable = ws.defined() && ws.dtype() == DType::u8 && ws.device().is_cpu() &&
                              ws.nbytes() == fwd.workspace_bytes;
          if (!usable) {
            ws = Tensor();
            pool2d_rebuild_workspace(p, x, dy.shape(), ws);
          }
        }
        const Cached& c = cached(pool_key(op, g, p, true), [&] {
          const auto hint = pool_forward_pd(engine_, d, true);
          return Cached{dnnl::pooling_backward(onednn::pool_backward_pd(
              engine_, d.alg, d.x, d.y, d.strides, d.kernel, d.pad_l, d.pad_r, hint))};
        });
        std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_DIFF_DST, wrap(d.y, dy)},
                                                   {DNNL_ARG_DIFF_SRC, wrap(d.x, dx)}};
        if (is_max) args.emplace(DNNL_ARG_WORKSPACE, dnnl::memory(ws_md, engine_, ws.raw()));
        execute(c, args);
      });
}

// ---- linear ---------------------------------------------------------------------------------

namespace {

struct LinearDescs {
  Md x, w, b, y;
};

LinearDescs linear_descs(int64_t n, int64_t k, int64_t m) {
  return {f32_md({n, k}, Tag::nc), f32_md({m, k}, Tag::oi), f32_md({m}, Tag::a),
          f32_md({n, m}, Tag::nc)};
}

// What oneDNN needs beyond check_linear_*: non-empty x (N, K) and w (M, K), already checked.
void linear_nonempty(const char* op, const Tensor& x, const Tensor& w) {
  OpCheck(op, Device::cpu())
      .that(x.numel() > 0 && w.numel() > 0, "empty tensor: x " + describe(x) + ", w " + describe(w));
}

}  // namespace

void CpuOps::linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  constexpr const char* op = "linear_forward";
  check_linear_forward(x, w, b, y, Device::cpu());
  require_supported(OpKind::linear_forward, {{x, "x"}, {w, "w"}, {b, "b"}, {y, "y"}});
  linear_nonempty(op, x, w);
  const int64_t n = x.dim(0), k = x.dim(1), m = w.dim(0);
  const bool bias = b.defined();
  const LinearDescs d = linear_descs(n, k, m);
  guarded(
      op, [&] { return "x " + shape_str(x.shape()) + ", w " + shape_str(w.shape()); },
      [&] {
        const Cached& c = cached(key_of(op, {n, k, m, bias ? 1 : 0}), [&] {
          return Cached{dnnl::inner_product_forward(onednn::inner_product_forward_pd(
              engine_, prop_kind::forward_training, d.x, d.w, bias ? &d.b : nullptr, d.y))};
        });
        std::unordered_map<int, dnnl::memory> args{
            {DNNL_ARG_SRC, wrap(d.x, x)}, {DNNL_ARG_WEIGHTS, wrap(d.w, w)}, {DNNL_ARG_DST, wrap(d.y, y)}};
        if (bias) args.emplace(DNNL_ARG_BIAS, wrap(d.b, b));
        execute(c, args);
      });
}

void CpuOps::linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
                             Tensor& dw, Tensor& db) {
  constexpr const char* op = "linear_backward";
  check_linear_backward(x, w, dy, dx, dw, db, Device::cpu());
  require_supported(OpKind::linear_backward,
                    {{x, "x"}, {w, "w"}, {dy, "dy"}, {dx, "dx"}, {dw, "dw"}, {db, "db"}});
  linear_nonempty(op, x, w);
  const int64_t n = x.dim(0), k = x.dim(1), m = w.dim(0);
  const bool bias = db.defined();
  const LinearDescs d = linear_descs(n, k, m);
  guarded(
      op, [&] { return "x " + shape_str(x.shape()) + ", w " + shape_str(w.shape()) + ", dy " + shape_str(dy.shape()); },
      [&] {
        if (dx.defined()) {
          const Cached& c = cached(key_of("linear_backward_data", {n, k, m}), [&] {
            const auto hint = onednn::inner_product_forward_pd(
                engine_, prop_kind::forward_training, d.x, d.w, nullptr, d.y);
            return Cached{dnnl::inner_product_backward_data(
                onednn::inner_product_backward_data_pd(engine_, d.x, d.w, d.y, hint))};
          });
          execute(c, {{DNNL_ARG_DIFF_DST, wrap(d.y, dy)},
                      {DNNL_ARG_WEIGHTS, wrap(d.w, w)},
                      {DNNL_ARG_DIFF_SRC, wrap(d.x, dx)}});
        }
        const Cached& c = cached(key_of("linear_backward_weights", {n, k, m, bias ? 1 : 0}), [&] {
          const auto hint = onednn::inner_product_forward_pd(
              engine_, prop_kind::forward_training, d.x, d.w, bias ? &d.b : nullptr, d.y);
          return Cached{dnnl::inner_product_backward_weights(
              onednn::inner_product_backward_weights_pd(engine_, d.x, d.w, bias ? &d.b : nullptr,
                                                        d.y, hint))};
        });
        std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, wrap(d.x, x)},
                                                   {DNNL_ARG_DIFF_DST, wrap(d.y, dy)},
                                                   {DNNL_ARG_DIFF_WEIGHTS, wrap(d.w, dw)}};
        if (bias) args.emplace(DNNL_ARG_DIFF_BIAS, wrap(d.b, db));
        execute(c, args);
      });
}

}  // namespace convoy::cpu
