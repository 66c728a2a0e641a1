#pragma once
// CpuOps: the op set on the host. oneDNN for convolution, pooling, batch norm, eltwise and
// inner product (plain nchw/oihw/nc formats, primitives cached per shape); OpenMP loops for
// the rest. One source file per op family (cpu_conv.cpp, cpu_batchnorm.cpp, cpu_pool.cpp,
// cpu_activation.cpp, cpu_linear.cpp, cpu_elementwise.cpp, cpu_softmax.cpp,
// cpu_optimizer.cpp, cpu_normalize_augment.cpp); the plumbing in cpu_ops.cpp.
// Internal to engine/backends/cpu. Not thread-safe: one backend per thread.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <unordered_map>
#include <vector>

#include "engine/ops/ops.h"
#include "engine/core/tensor.h"

namespace convoy::cpu {

class CpuOps final : public Ops {
 public:
  // engine and stream belong to the backend and outlive this object. threads: 0 = OpenMP's
  // default (all cores).
  CpuOps(const dnnl::engine& engine, const dnnl::stream& stream, int threads);

  int threads() const { return threads_; }
  // f32 in nchw, everything; besides: cast between f32, bf16 and f16 in either layout, fill,
  // concat and split of any dtype (they copy bytes), softmax and cross-entropy of bf16 and f16
  // logits, normalize_augment into bf16. One exhaustive switch in cpu_ops.cpp.
  bool supports(OpKind op, DType dtype, Layout layout) const override;
  // Number of oneDNN primitives cached so far (for tests and diagnostics).
  size_t cached_primitives() const { return cache_.size(); }

  void conv2d_forward(const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& b,
                      Tensor& y) override;
  // The convolution with its bias, then the add and ReLU in one pass over y (the CPU's inference
  // plans fuse these their own way; this serves a folded model run layer by layer).
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
  void linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
                       Tensor& dw, Tensor& db) override;

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

 private:
  struct Cached {
    explicit Cached(dnnl::primitive p, dnnl::memory::desc ws_md = {}, size_t ws_bytes = 0)
        : prim(std::move(p)), workspace_md(std::move(ws_md)), workspace_bytes(ws_bytes) {}
    dnnl::primitive prim;
    dnnl::memory::desc workspace_md;  // max pooling's forward record, else empty
    size_t workspace_bytes = 0;
    mutable bool takes_shift = false;  // batch norm backward: see onednn_compat.h
  };
  // Returns the cached primitive for `key`, building it with make() on a miss.
  template <class Make>
  const Cached& cached(const std::string& key, Make&& make);
  void execute(const Cached& c, const std::unordered_map<int, dnnl::memory>& args);
  dnnl::memory wrap(const dnnl::memory::desc& md, const Tensor& t) const;

  // Throws DeviceError, naming the op, the tensor and its dtype, unless supports(op, ...)
  // holds for each defined tensor's dtype and layout. Called after the op's shared check.
  void require_supported(OpKind op, std::initializer_list<NamedArg> tensors) const;

  // Runs a training forward of max pooling to rebuild a workspace the caller did not keep.
  void pool2d_rebuild_workspace(const Pool2dParams& p, const Tensor& x, const Shape& y_shape,
                                Tensor& workspace);

  dnnl::engine engine_;
  dnnl::stream stream_;
  int threads_ = 0;
  std::unordered_map<std::string, Cached> cache_;
  std::vector<float> bn_variance_;  // batch norm backward: variance rebuilt from 1/std, (C)
  std::vector<float> bn_shift_;     // batch norm backward: an unused shift input, (C)
};

}  // namespace convoy::cpu
