// CudaOps softmax, the softmax cross-entropy loss and the softmax layer's over channels, on
// Convoy's kernels.
#include "engine/backends/cuda/cuda_ops.h"

#include "engine/backends/cuda/cuda_ops_internal.h"
#include "kernels/softmax.cuh"

namespace convoy::cuda {

void CudaOps::softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float smoothing,
                                    Tensor& loss, Tensor& dlogits, Tensor& correct) {
  check_softmax_cross_entropy(logits, labels, smoothing, loss, dlogits, correct, device());
  require_supported(OpKind::softmax_cross_entropy, logits);
  const int64_t n = logits.dim(0), c = logits.dim(1);
  void* scratch = scratch_.get(kernels::softmax_cross_entropy_scratch_bytes(n));
  kernels::softmax_cross_entropy(dt_of(logits.dtype()), logits.raw(), labels.data<int32_t>(),
                                 smoothing, loss.data<float>(),
                                 dlogits.defined() ? dlogits.raw() : nullptr,
                                 correct.defined() ? correct.data<int32_t>() : nullptr, n, c,
                                 scratch, ctx_.stream);
}

void CudaOps::softmax(const Tensor& logits, Tensor& probs) {
  check_softmax(logits, probs, device());
  require_supported(OpKind::softmax, logits);
  kernels::softmax(dt_of(logits.dtype()), logits.raw(), probs.data<float>(), logits.dim(0),
                   logits.dim(1), ctx_.stream);
}

void CudaOps::channel_softmax_forward(const Tensor& x, Tensor& y) {
  check_channel_softmax_forward(x, y, device());
  require_supported(OpKind::channel_softmax_forward, x);
  const ChannelView v = channel_view(x);
  kernels::channel_softmax_forward(dt_of(x.dtype()), x.raw(), y.raw(), v.outer, v.channels, v.inner, ctx_.stream);
}

void CudaOps::channel_softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  check_channel_softmax_backward(y, dy, dx, device());
  require_supported(OpKind::channel_softmax_backward, y);
  const ChannelView v = channel_view(y);
  kernels::channel_softmax_backward(dt_of(y.dtype()), y.raw(), dy.raw(), dx.raw(), v.outer, v.channels, v.inner,
                                    ctx_.stream);
}

}  // namespace convoy::cuda
