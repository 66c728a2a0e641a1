#include "engine/backends/cuda/cuda_ops.h"

#include <string>

#include "engine/backends/cuda/cuda_ops_internal.h"

namespace convoy::cuda {

CudaOps::CudaOps(const CudaContext& ctx) : ctx_(ctx) {
  conv_workspace_.bind(ctx_.allocator);
  scratch_.bind(ctx_.allocator);
  slots_.bind(ctx_.allocator);
  // For tests and debugging: batch norm through Convoy's kernels instead of cuDNN.
  bn_kernels_only_.fill(ctx_.tunables.bn_kernels);
  conv_graph_api_ = ctx_.tunables.cudnn_graph;
  stem_gemm_ = ctx_.tunables.stem_gemm;
}

CudaOps::~CudaOps() = default;

// Every op runs in both layouts, so only the dtype decides. `layout` is that of the 4-D
// activations (ops.h); the ops on (N, C) matrices (linear, the softmaxes) see nchw tensors
// in either, and Model::unsupported_ops asks for them with the model's layout.
bool CudaOps::supports(OpKind op, DType dtype, Layout layout) const {
  const bool floating = is_floating(dtype);
  switch (op) {
    // cuDNN (and Convoy's kernels where it falls short) in either layout.
    case OpKind::conv2d_forward:
    case OpKind::conv2d_backward_data:
    case OpKind::conv2d_backward_weights:
    case OpKind::batchnorm_forward_train:
    case OpKind::batchnorm_forward_eval:
    case OpKind::batchnorm_backward:
    case OpKind::pool2d_forward:
    case OpKind::pool2d_backward:
    // Convoy's kernels, which index either layout.
    case OpKind::channel_softmax_forward:
    case OpKind::channel_softmax_backward:
    case OpKind::upsample_forward:
    case OpKind::upsample_backward:
    // Elementwise kernels, blind to the layout.
    case OpKind::activation_forward:
    case OpKind::activation_backward:
    case OpKind::add:
    case OpKind::add_inplace:
    case OpKind::dropout_forward:
    case OpKind::dropout_backward:
    // Convoy's kernels (kernels/channel_scale.cu), in either layout.
    case OpKind::channel_scale_forward:
    case OpKind::channel_scale_backward:
    // cuBLAS and the row kernels on (N, C) matrices.
    case OpKind::linear_forward:
    case OpKind::linear_backward:
    case OpKind::softmax_cross_entropy:
    case OpKind::softmax:
    // Either side of a cast, and normalize_augment's output (its images are u8 nchw).
    case OpKind::cast:
    case OpKind::normalize_augment: return floating;
    // Byte copies and stores: every dtype, either layout.
    case OpKind::concat_channels:
    case OpKind::split_channels:
    case OpKind::fill: return true;
    // f32 master weights, as flat arrays.
    case OpKind::sgd_update:
    case OpKind::adamw_update: return dtype == DType::f32;
  }
  return false;
}

namespace {
const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::nchw: return "nchw";
    case Layout::nhwc: return "nhwc";
  }
  return "unknown layout";
}
}  // namespace

void CudaOps::require_supported(OpKind op, const Tensor& t) const {
  if (!supports(op, t.dtype(), t.layout()))
    throw DeviceError(std::string(op_name(op)) + ": the CUDA backend does not support " +
                      std::string(dtype_name(t.dtype())) + " " + layout_name(t.layout()) + " tensors");
}

}  // namespace convoy::cuda
