#pragma once
// The only place that knows the oneDNN major version. oneDNN 2.x builds primitive descriptors
// from a separate op descriptor (`X::desc` then `X::primitive_desc(desc, engine, hint)`);
// 3.x constructs them directly (`X::primitive_desc(engine, ..., hint)`) and made pooling's
// dilation argument mandatory. Debian 12 ships 2.6, Ubuntu 24.04 (the CUDA images) 3.x.
// Dilations follow oneDNN's convention here: 0 means dense (PyTorch's dilation - 1).
#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_version.h>

#include <stdexcept>
#include <vector>

namespace convoy::cpu::onednn {

using dnnl::algorithm;
using dnnl::memory;
using dnnl::normalization_flags;
using dnnl::prop_kind;

// bias: nullptr for a convolution without bias. alg: convolution_direct, or convolution_winograd
// (oneDNN throws "unimplemented" where it has no Winograd kernel for the case).
inline dnnl::convolution_forward::primitive_desc conv_forward_pd(
    const dnnl::engine& eng, prop_kind kind, const memory::desc& src, const memory::desc& weights,
    const memory::desc* bias, const memory::desc& dst, const memory::dims& strides,
    const memory::dims& dilates, const memory::dims& pad_l, const memory::dims& pad_r,
    const dnnl::primitive_attr& attr = dnnl::primitive_attr(), algorithm alg = algorithm::convolution_direct) {
  using P = dnnl::convolution_forward;
#if DNNL_VERSION_MAJOR >= 3
  if (bias)
    return P::primitive_desc(eng, kind, alg, src, weights, *bias, dst, strides, dilates, pad_l, pad_r, attr);
  return P::primitive_desc(eng, kind, alg, src, weights, dst, strides, dilates, pad_l, pad_r, attr);
#else
  if (bias)
    return P::primitive_desc(P::desc(kind, alg, src, weights, *bias, dst, strides, dilates, pad_l, pad_r), attr, eng);
  return P::primitive_desc(P::desc(kind, alg, src, weights, dst, strides, dilates, pad_l, pad_r), attr, eng);
#endif
}

inline dnnl::convolution_backward_data::primitive_desc conv_backward_data_pd(
    const dnnl::engine& eng, const memory::desc& diff_src, const memory::desc& weights,
    const memory::desc& diff_dst, const memory::dims& strides, const memory::dims& dilates,
    const memory::dims& pad_l, const memory::dims& pad_r,
    const dnnl::convolution_forward::primitive_desc& hint) {
  using P = dnnl::convolution_backward_data;
#if DNNL_VERSION_MAJOR >= 3
  return P::primitive_desc(eng, algorithm::convolution_direct, diff_src, weights, diff_dst,
                           strides, dilates, pad_l, pad_r, hint);
#else
  return P::primitive_desc(P::desc(algorithm::convolution_direct, diff_src, weights, diff_dst,
                                   strides, dilates, pad_l, pad_r),
                           eng, hint);
#endif
}

// diff_bias: nullptr when the bias gradient is not wanted.
inline dnnl::convolution_backward_weights::primitive_desc conv_backward_weights_pd(
    const dnnl::engine& eng, const memory::desc& src, const memory::desc& diff_weights,
    const memory::desc* diff_bias, const memory::desc& diff_dst, const memory::dims& strides,
    const memory::dims& dilates, const memory::dims& pad_l, const memory::dims& pad_r,
    const dnnl::convolution_forward::primitive_desc& hint) {
  using P = dnnl::convolution_backward_weights;
#if DNNL_VERSION_MAJOR >= 3
  if (diff_bias)
    return P::primitive_desc(eng, algorithm::convolution_direct, src, diff_weights, *diff_bias,
                             diff_dst, strides, dilates, pad_l, pad_r, hint);
  return P::primitive_desc(eng, algorithm::convolution_direct, src, diff_weights, diff_dst,
                           strides, dilates, pad_l, pad_r, hint);
#else
  if (diff_bias)
    return P::primitive_desc(P::desc(algorithm::convolution_direct, src, diff_weights, *diff_bias,
                                     diff_dst, strides, dilates, pad_l, pad_r),
                             eng, hint);
  return P::primitive_desc(P::desc(algorithm::convolution_direct, src, diff_weights, diff_dst,
                                   strides, dilates, pad_l, pad_r),
                           eng, hint);
#endif
}

// Undilated pooling (our op set has no pooling dilation).
inline dnnl::pooling_forward::primitive_desc pool_forward_pd(
    const dnnl::engine& eng, prop_kind kind, algorithm alg, const memory::desc& src,
    const memory::desc& dst, const memory::dims& strides, const memory::dims& kernel,
    const memory::dims& pad_l, const memory::dims& pad_r,
    const dnnl::primitive_attr& attr = dnnl::primitive_attr()) {
  using P = dnnl::pooling_forward;
#if DNNL_VERSION_MAJOR >= 3
  const memory::dims dilation(strides.size(), 0);
  return P::primitive_desc(eng, kind, alg, src, dst, strides, kernel, dilation, pad_l, pad_r, attr);
#else
  return P::primitive_desc(P::desc(kind, alg, src, dst, strides, kernel, pad_l, pad_r), attr, eng);
#endif
}

inline dnnl::pooling_backward::primitive_desc pool_backward_pd(
    const dnnl::engine& eng, algorithm alg, const memory::desc& diff_src,
    const memory::desc& diff_dst, const memory::dims& strides, const memory::dims& kernel,
    const memory::dims& pad_l, const memory::dims& pad_r,
    const dnnl::pooling_forward::primitive_desc& hint) {
  using P = dnnl::pooling_backward;
#if DNNL_VERSION_MAJOR >= 3
  const memory::dims dilation(strides.size(), 0);
  return P::primitive_desc(eng, alg, diff_src, diff_dst, strides, kernel, dilation, pad_l, pad_r,
                           hint);
#else
  return P::primitive_desc(P::desc(alg, diff_src, diff_dst, strides, kernel, pad_l, pad_r), eng,
                           hint);
#endif
}

// Softmax (softmax_accurate: the maximum subtracted first) along `axis`. 2.x's
// softmax_forward has no destination descriptor; its softmax_v2 is 3.x's softmax.
#if DNNL_VERSION_MAJOR >= 3
using SoftmaxForward = dnnl::softmax_forward;
using SoftmaxBackward = dnnl::softmax_backward;
#else
using SoftmaxForward = dnnl::softmax_v2_forward;
using SoftmaxBackward = dnnl::softmax_v2_backward;
#endif
inline SoftmaxForward::primitive_desc softmax_forward_pd(const dnnl::engine& eng, prop_kind kind,
                                                         const memory::desc& src, const memory::desc& dst, int axis,
                                                         const dnnl::primitive_attr& attr = dnnl::primitive_attr()) {
#if DNNL_VERSION_MAJOR >= 3
  return SoftmaxForward::primitive_desc(eng, kind, algorithm::softmax_accurate, src, dst, axis, attr);
#else
  return SoftmaxForward::primitive_desc(
      SoftmaxForward::desc(kind, algorithm::softmax_accurate, src, dst, axis), attr, eng);
#endif
}
inline SoftmaxBackward::primitive_desc softmax_backward_pd(const dnnl::engine& eng, const memory::desc& diff_src,
                                                           const memory::desc& diff_dst, const memory::desc& dst,
                                                           int axis, const SoftmaxForward::primitive_desc& hint) {
#if DNNL_VERSION_MAJOR >= 3
  return SoftmaxBackward::primitive_desc(eng, algorithm::softmax_accurate, diff_src, diff_dst, dst, axis, hint);
#else
  return SoftmaxBackward::primitive_desc(
      SoftmaxBackward::desc(algorithm::softmax_accurate, diff_src, diff_dst, dst, axis), eng, hint);
#endif
}

// Resampling from src's size to dst's (the factors are dst / src).
inline dnnl::resampling_forward::primitive_desc resampling_forward_pd(
    const dnnl::engine& eng, prop_kind kind, algorithm alg, const memory::desc& src, const memory::desc& dst,
    const dnnl::primitive_attr& attr = dnnl::primitive_attr()) {
  using P = dnnl::resampling_forward;
#if DNNL_VERSION_MAJOR >= 3
  return P::primitive_desc(eng, kind, alg, src, dst, attr);
#else
  return P::primitive_desc(P::desc(kind, alg, src, dst), attr, eng);
#endif
}
inline dnnl::resampling_backward::primitive_desc resampling_backward_pd(
    const dnnl::engine& eng, algorithm alg, const memory::desc& diff_src, const memory::desc& diff_dst,
    const dnnl::resampling_forward::primitive_desc& hint) {
  using P = dnnl::resampling_backward;
#if DNNL_VERSION_MAJOR >= 3
  return P::primitive_desc(eng, alg, diff_src, diff_dst, hint);
#else
  return P::primitive_desc(P::desc(alg, diff_src, diff_dst), eng, hint);
#endif
}

// src and dst share `data`.
inline dnnl::batch_normalization_forward::primitive_desc bnorm_forward_pd(
    const dnnl::engine& eng, prop_kind kind, const memory::desc& data, float eps,
    normalization_flags flags) {
  using P = dnnl::batch_normalization_forward;
#if DNNL_VERSION_MAJOR >= 3
  return P::primitive_desc(eng, kind, data, data, eps, flags);
#else
  return P::primitive_desc(P::desc(kind, data, eps, flags), eng);
#endif
}

inline dnnl::batch_normalization_backward::primitive_desc bnorm_backward_pd(
    const dnnl::engine& eng, prop_kind kind, const memory::desc& diff_data,
    const memory::desc& data, float eps, normalization_flags flags,
    const dnnl::batch_normalization_forward::primitive_desc& hint) {
  using P = dnnl::batch_normalization_backward;
#if DNNL_VERSION_MAJOR >= 3
  return P::primitive_desc(eng, kind, diff_data, diff_data, data, eps, flags, hint);
#else
  return P::primitive_desc(P::desc(kind, diff_data, data, eps, flags), eng, hint);
#endif
}

inline dnnl::eltwise_forward::primitive_desc eltwise_forward_pd(
    const dnnl::engine& eng, prop_kind kind, algorithm alg, const memory::desc& data, float alpha,
    float beta, const dnnl::primitive_attr& attr = dnnl::primitive_attr()) {
  using P = dnnl::eltwise_forward;
#if DNNL_VERSION_MAJOR >= 3
  return P::primitive_desc(eng, kind, alg, data, data, alpha, beta, attr);
#else
  return P::primitive_desc(P::desc(kind, alg, data, alpha, beta), attr, eng);
#endif
}

// dst = src0 (alg) src1, src1 broadcast where its dimensions are 1 (squeeze-and-excitation's
// per-channel product: src1 (N, C, 1, 1)).
inline dnnl::binary::primitive_desc binary_pd(const dnnl::engine& eng, algorithm alg, const memory::desc& src0,
                                              const memory::desc& src1, const memory::desc& dst,
                                              const dnnl::primitive_attr& attr = dnnl::primitive_attr()) {
#if DNNL_VERSION_MAJOR >= 3
  return dnnl::binary::primitive_desc(eng, alg, src0, src1, dst, attr);
#else
  return dnnl::binary::primitive_desc(dnnl::binary::desc(alg, src0, src1, dst), attr, eng);
#endif
}

// An eltwise post-op (2.x took a leading scale, 3.x dropped it).
inline void append_eltwise(dnnl::post_ops& ops, algorithm alg, float alpha, float beta) {
#if DNNL_VERSION_MAJOR >= 3
  ops.append_eltwise(alg, alpha, beta);
#else
  ops.append_eltwise(1.0f, alg, alpha, beta);
#endif
}

// `data` is the forward source (we never use the *_use_dst_for_bwd algorithms).
inline dnnl::eltwise_backward::primitive_desc eltwise_backward_pd(
    const dnnl::engine& eng, algorithm alg, const memory::desc& diff_data,
    const memory::desc& data, float alpha, float beta,
    const dnnl::eltwise_forward::primitive_desc& hint) {
  using P = dnnl::eltwise_backward;
#if DNNL_VERSION_MAJOR >= 3
  return P::primitive_desc(eng, alg, diff_data, diff_data, data, alpha, beta, hint);
#else
  return P::primitive_desc(P::desc(alg, diff_data, data, alpha, beta), eng, hint);
#endif
}

// bias: nullptr for an inner product without bias.
inline dnnl::inner_product_forward::primitive_desc inner_product_forward_pd(
    const dnnl::engine& eng, prop_kind kind, const memory::desc& src,
    const memory::desc& weights, const memory::desc* bias, const memory::desc& dst,
    const dnnl::primitive_attr& attr = dnnl::primitive_attr()) {
  using P = dnnl::inner_product_forward;
#if DNNL_VERSION_MAJOR >= 3
  if (bias) return P::primitive_desc(eng, kind, src, weights, *bias, dst, attr);
  return P::primitive_desc(eng, kind, src, weights, dst, attr);
#else
  if (bias) return P::primitive_desc(P::desc(kind, src, weights, *bias, dst), attr, eng);
  return P::primitive_desc(P::desc(kind, src, weights, dst), attr, eng);
#endif
}

inline dnnl::inner_product_backward_data::primitive_desc inner_product_backward_data_pd(
    const dnnl::engine& eng, const memory::desc& diff_src, const memory::desc& weights,
    const memory::desc& diff_dst, const dnnl::inner_product_forward::primitive_desc& hint) {
  using P = dnnl::inner_product_backward_data;
#if DNNL_VERSION_MAJOR >= 3
  return P::primitive_desc(eng, diff_src, weights, diff_dst, hint);
#else
  return P::primitive_desc(P::desc(diff_src, weights, diff_dst), eng, hint);
#endif
}

// diff_bias: nullptr when the bias gradient is not wanted.
inline dnnl::inner_product_backward_weights::primitive_desc inner_product_backward_weights_pd(
    const dnnl::engine& eng, const memory::desc& src, const memory::desc& diff_weights,
    const memory::desc* diff_bias, const memory::desc& diff_dst,
    const dnnl::inner_product_forward::primitive_desc& hint) {
  using P = dnnl::inner_product_backward_weights;
#if DNNL_VERSION_MAJOR >= 3
  if (diff_bias) return P::primitive_desc(eng, src, diff_weights, *diff_bias, diff_dst, hint);
  return P::primitive_desc(eng, src, diff_weights, diff_dst, hint);
#else
  if (diff_bias)
    return P::primitive_desc(P::desc(src, diff_weights, *diff_bias, diff_dst), eng, hint);
  return P::primitive_desc(P::desc(src, diff_weights, diff_dst), eng, hint);
#endif
}

// Batch norm backward with use_shift: oneDNN 2.x counts DNNL_ARG_SHIFT among the inputs (the
// gradients do not read it) and fails without it; 3.x counts one input fewer and fails with it
// ("bad number of inputs"). CpuOps starts from this and flips once if execution disagrees.
constexpr bool kBnormBackwardTakesShift = DNNL_VERSION_MAJOR < 3;

// A memory descriptor's logical dimensions (2.x: dims(), 3.x: get_dims()).
inline memory::dims dims_of(const memory::desc& md) {
#if DNNL_VERSION_MAJOR >= 3
  return md.get_dims();
#else
  return md.dims();
#endif
}

// The inner blocks of a blocked memory descriptor (empty for a plain layout such as nchw).
inline memory::dims inner_blocks(const memory::desc& md) {
#if DNNL_VERSION_MAJOR >= 3
  return md.get_inner_blks();
#else
  const auto& b = md.data.format_desc.blocking;
  return memory::dims(b.inner_blks, b.inner_blks + b.inner_nblks);
#endif
}

// The strides of a blocked (or plain) memory descriptor, one per dimension.
inline memory::dims strides_of(const memory::desc& md) {
#if DNNL_VERSION_MAJOR >= 3
  return md.get_strides();
#else
  const auto& b = md.data.format_desc.blocking;
  return memory::dims(b.strides, b.strides + md.data.ndims);
#endif
}

inline memory::data_type data_type_of(const memory::desc& md) {
#if DNNL_VERSION_MAJOR >= 3
  return md.get_data_type();
#else
  return md.data_type();
#endif
}

// int8 inference: 2.x bakes "output scales" into the attribute (dst = scale * accumulator);
// 3.x replaced them with per-argument scales passed at execution, which the plan does not use
// yet, so int8 plans need 2.x (the caller checks kHasOutputScales first).
inline constexpr bool kHasOutputScales = DNNL_VERSION_MAJOR < 3;
inline void set_output_scales(dnnl::primitive_attr& attr, int mask, const std::vector<float>& scales) {
#if DNNL_VERSION_MAJOR >= 3
  (void)attr, (void)mask, (void)scales;
  throw std::logic_error("oneDNN 3.x has no output scales");
#else
  attr.set_output_scales(mask, scales);
#endif
}

// An eltwise post-op whose result is multiplied by `scale` (2.x only; int8 plans use it to apply
// the destination's scale after a non-linear activation such as GELU).
inline void append_eltwise_scaled(dnnl::post_ops& ops, float scale, algorithm alg, float alpha, float beta) {
#if DNNL_VERSION_MAJOR >= 3
  (void)ops, (void)scale, (void)alg, (void)alpha, (void)beta;
  throw std::logic_error("oneDNN 3.x has no eltwise post-op scale");
#else
  ops.append_eltwise(scale, alg, alpha, beta);
#endif
}

// Bytes a memory descriptor spans (same spelling in 2.x and 3.x, kept here for symmetry).
inline size_t md_bytes(const memory::desc& md) { return md.get_size(); }

}  // namespace convoy::cpu::onednn
