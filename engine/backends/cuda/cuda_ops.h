#pragma once
// The op set on an NVIDIA GPU: cuDNN for convolution and batch norm, cuBLAS for linear
// layers, Convoy's kernels (kernels/) for the rest. Everything is queued on the context's
// one stream; nothing here synchronizes except algorithm search on a new shape.
#include <array>
#include <map>
#include <memory>
#include <vector>

#include "engine/backends/cuda/cuda_context.h"
#include "engine/ops/ops.h"

namespace convoy::cuda {

// cuDNN descriptors and the algorithm chosen once for one convolution shape.
struct ConvPlan;
class GraphConvPlan;
// Which of a convolution's three computations a plan is for (part of the plan's cache key).
enum class ConvKind : int { forward = 0, backward_data = 1, backward_filter = 2 };

class CudaOps final : public Ops {
 public:
  explicit CudaOps(const CudaContext& ctx);
  ~CudaOps() override;

  // Exactly what the code below runs: f32, bf16 and f16 in either layout for most ops;
  // concat, split and fill on every dtype; the optimizer updates on f32 master weights.
  // Each op calls require_supported() after its argument checks.
  bool supports(OpKind op, DType dtype, Layout layout) const override;

  void conv2d_forward(const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& b,
                      Tensor& y) override;
  bool conv2d_forward_fused(const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& b,
                            const Tensor* residual, bool relu, Tensor& y) override;
  void conv2d_backward_data(const Conv2dParams& p, const Tensor& dy, const Tensor& w,
                            Tensor& dx, bool accumulate = false) override;
  void conv2d_backward_weights(const Conv2dParams& p, const Tensor& x, const Tensor& dy,
                               Tensor& dw, Tensor& db) override;

  void batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                               float momentum, float eps, Tensor& running_mean,
                               Tensor& running_var, Tensor& y, Tensor& saved_mean,
                               Tensor& saved_invstd, bool relu, const Tensor* residual) override;
  void batchnorm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                              const Tensor& running_mean, const Tensor& running_var, float eps,
                              Tensor& y, bool relu, const Tensor* residual) override;
  void batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                          const Tensor& saved_mean, const Tensor& saved_invstd, Tensor& dx,
                          Tensor& dgamma, Tensor& dbeta, const Tensor* relu_beta) override;

  void activation_forward(Activation kind, float alpha, const Tensor& x, Tensor& y) override;
  void activation_backward(Activation kind, float alpha, const Tensor& x, const Tensor& y,
                           const Tensor& dy, Tensor& dx) override;

  void pool2d_forward(const Pool2dParams& p, const Tensor& x, Tensor& y, Tensor& workspace,
                      bool training) override;
  void pool2d_backward(const Pool2dParams& p, const Tensor& x, const Tensor& y, const Tensor& dy,
                       const Tensor& workspace, Tensor& dx) override;

  void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) override;
  void linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                       Tensor& db) override;

  void add(const Tensor& a, const Tensor& b, Tensor& y, bool relu) override;
  void add_inplace(Tensor& y, const Tensor& x) override;
  void concat_channels(std::span<const Tensor> xs, Tensor& y) override;
  void split_channels(const Tensor& y, std::span<Tensor> xs) override;

  void dropout_forward(float p, uint64_t seed, const Tensor& x, Tensor& y) override;
  void dropout_backward(float p, uint64_t seed, const Tensor& dy, Tensor& dx) override;

  void channel_scale_forward(const Tensor& x, const Tensor& s, Tensor& y) override;
  void channel_scale_backward(const Tensor& x, const Tensor& s, const Tensor& dy, Tensor& dx,
                              Tensor& ds) override;

  void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float smoothing,
                             Tensor& loss, Tensor& dlogits, Tensor& correct) override;
  void softmax(const Tensor& logits, Tensor& probs) override;
  void channel_softmax_forward(const Tensor& x, Tensor& y) override;
  void channel_softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override;
  void upsample_forward(UpsampleMode mode, const Tensor& x, Tensor& y) override;
  void upsample_backward(UpsampleMode mode, const Tensor& dy, Tensor& dx) override;

  void cast(const Tensor& x, Tensor& y) override;
  void fill(Tensor& y, float value) override;

  void sgd_update(std::span<const SgdSlot> slots, const SgdHyper& h) override;
  void adamw_update(std::span<const AdamSlot> slots, const AdamHyper& h) override;

  void normalize_augment(const Tensor& images, const NormalizeAugment& a, uint64_t seed,
                         Tensor& y) override;

  // True once cuDNN refused batch norm for a dtype and Convoy's kernels took over.
  bool batchnorm_uses_kernels(DType dtype) const { return bn_kernels_only_[static_cast<int>(dtype)]; }

 private:
  // The plan for this shape, made on first use: descriptors, and the algorithm benchmarked
  // on these very tensors (x the input or dx, w the weights or dw, y the output or dy).
  // The benchmark overwrites the tensor the convolution writes, unless `keep_written` (an
  // accumulating data gradient): then it writes into a scratch tensor of that shape.
  ConvPlan& conv_plan(ConvKind kind, const Conv2dParams& p, const Tensor& x, const Tensor& w,
                      const Tensor& y, bool keep_written = false);
  // cuDNN for nchw batch norm until it refuses a dtype; Convoy's kernels for nhwc. cuDNN's
  // plain entry points run generic kernels on nhwc (fmnet bf16 on the H200: 34k img/s against
  // 161k with ours), and its persistent Ex kernels drifted from nchw at fmnet's sizes (13%
  // gradient differences, 92.3% test accuracy against 94.1%).
  bool use_cudnn_bn(const Tensor& x) const {
    return !bn_kernels_only_[static_cast<int>(x.dtype())] && x.layout() == Layout::nchw;
  }
  // t (N, C, H, W) nhwc as a new tensor with `channels` >= C channels, the extra ones zero.
  Tensor padded_channels(const Tensor& t, int64_t channels);
  // Uploads `bytes` to the slot buffer unless they equal what it already holds.
  void* upload_slots(const std::vector<unsigned char>& bytes);
  // This backend's device, for the argument checks (engine/ops).
  Device device() const { return Device::cuda(ctx_.device); }
  // After the argument checks: throws DeviceError naming the op, t's dtype and layout
  // unless supports(op, t.dtype(), t.layout()).
  void require_supported(OpKind op, const Tensor& t) const;

  CudaContext ctx_;
  ScratchBuffer conv_workspace_;  // cuDNN workspaces
  ScratchBuffer scratch_;         // reduction partials, per-row losses
  ScratchBuffer slots_;           // optimizer slot arrays
  std::vector<unsigned char> slots_host_;  // what slots_ holds
  std::map<std::array<int64_t, 24>, std::unique_ptr<ConvPlan>> conv_plans_;
  // conv2d_forward_fused's plans by geometry and epilogue; null where cuDNN has none.
  std::map<std::array<int64_t, 24>, std::unique_ptr<GraphConvPlan>> fused_conv_plans_;
  std::array<bool, 5> bn_kernels_only_{};  // per DType
  // Reduced-precision convolutions through cuDNN's graph API (GraphConvPlan) unless
  // CudaTunables::cudnn_graph is off (A/B and debugging: the legacy calls throughout).
  bool conv_graph_api_ = true;
  // Narrow stems (7x7 over RGB) as im2col + one cuBLAS GEMM (cuda_conv.cpp) unless
  // CudaTunables::stem_gemm is off (A/B: cuDNN's implicit GEMM).
  bool stem_gemm_ = true;
};

}  // namespace convoy::cuda
