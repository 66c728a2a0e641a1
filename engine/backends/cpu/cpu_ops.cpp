// CpuOps' plumbing: what it supports, the DeviceError for what it does not, and running the
// cached oneDNN primitives. The ops live in one file per op family (cpu_conv.cpp,
// cpu_batchnorm.cpp, ..., cpu_elementwise.cpp, cpu_optimizer.cpp).
#include <omp.h>

#include <algorithm>
#include <string>

#include "engine/backends/cpu/cpu_loops.h"
#include "engine/backends/cpu/cpu_ops.h"
#include "engine/backends/cpu/cpu_primitives.h"
#include "engine/core/error.h"

namespace convoy::cpu {

OmpThreadsScope::OmpThreadsScope(int threads) {
  // The config bounds threads to 1 ... 1024; this is the last line before libgomp, which
  // crashes when asked for a team of 100,000.
  threads = std::min(threads, kMaxOmpThreads);
  if (threads > 0) {
    previous_ = omp_get_max_threads();
    if (previous_ != threads) omp_set_num_threads(threads);
    else previous_ = 0;
  }
}

OmpThreadsScope::~OmpThreadsScope() {
  if (previous_ > 0) omp_set_num_threads(previous_);
}

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
    case OpKind::channel_softmax_forward:
    case OpKind::channel_softmax_backward:
    case OpKind::upsample_forward:
    case OpKind::upsample_backward:
    case OpKind::linear_forward:
    case OpKind::linear_backward:
    case OpKind::add:
    case OpKind::add_inplace:
    case OpKind::dropout_forward:
    case OpKind::dropout_backward:
    case OpKind::channel_scale_forward:
    case OpKind::channel_scale_backward:
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

void CpuOps::execute(const Cached& c, const std::unordered_map<int, dnnl::memory>& args) {
  OmpThreadsScope scope(threads_);
  c.prim.execute(stream_, args);
  stream_.wait();
}

dnnl::memory CpuOps::wrap(const dnnl::memory::desc& md, const Tensor& t) const {
  return dnnl::memory(md, engine_, const_cast<void*>(t.raw()));
}

}  // namespace convoy::cpu
