// The 8-bit inference plan on an NVIDIA GPU (issue 37). Which steps run in 8 bits, and why:
//   - A convolution runs as one cuDNN graph of an 8-bit convolution with its requantization,
//     bias, residual add and ReLU in the epilogue (GraphConvPlan, `quantized`), where its input
//     and output have calibrated ranges and both channel counts are multiples of 16 (cuDNN's
//     8-bit channels-last engines want whole vectors of channels). The stem, which reads the
//     image's 1 - 3 channels, is therefore bf16: it is a few percent of the work, and the image's
//     own quantization error would enter everything after it.
//   - The classifier (a linear layer, the logits) stays bf16: its input is the pooled features,
//     1% of the work, and its output is what the user reads.
//   - Max pooling runs on the 8-bit values (the maximum of quantized values is the quantized
//     maximum); a global average pool of 8-bit values is summed in f32 and handed to the
//     classifier in bf16 (eight_bit.cu). Other pools and a flatten run in bf16.
// A value is kept in whichever form its readers need: a bf16 output is quantized once, before
// the first 8-bit reader, and an 8-bit one dequantized once for a bf16 reader.
#include "engine/backends/cuda/cuda_eight_bit.h"

#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backends/cuda/cuda_ops.h"
#include "engine/backends/cuda/cuda_ops_internal.h"
#include "engine/backends/cuda/cudnn_graph_conv.h"
#include "engine/core/error.h"
#include "kernels/eight_bit.cuh"

namespace convoy::cuda {

namespace {

// cuDNN 9's 8-bit convolutions, channels-last: input and output channels in whole vectors.
constexpr int64_t kChannelMultiple = 16;

kernels::Byte8 byte8(EightBitType t) { return t == EightBitType::int8 ? kernels::Byte8::int8 : kernels::Byte8::e4m3; }

// A weight in the 8-bit type: int8 rounded to nearest and clamped to [-127, 127]; e4m3 rounded
// to nearest even, saturated at 448 (cuda_fp8.h's conversion, host side).
uint8_t weight_byte(float v, EightBitType t) {
  if (t == EightBitType::int8)
    return static_cast<uint8_t>(static_cast<int8_t>(std::clamp(std::nearbyint(v), -127.0f, 127.0f)));
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

class CudaEightBitForward final : public CompiledForward {
 public:
  CudaEightBitForward(const CudaContext& ctx, CudaOps& ops, const EightBitGraph& graph, int64_t batch)
      : ctx_(ctx), ops_(ops), type_(graph.type), qmax_(eight_bit_max(graph.type)) {
    workspace_.bind(ctx_.allocator);
    values_.resize(graph.steps.size() + 1);
    Value& in = values_[0];
    in.shape = {batch, graph.input.at(0), graph.input.at(1), graph.input.at(2)};
    in.bf16 = Tensor(in.shape, DType::bf16, ctx_.tensors, Layout::nhwc);
    in.scale = graph.input_range > 0 ? qmax_ / graph.input_range : 0;
    for (size_t i = 0; i < graph.steps.size(); ++i) add_step(graph.steps[i], static_cast<int>(i + 1));
    logits_ = bf16_of(static_cast<int>(graph.steps.size()));
    workspace_.get(workspace_bytes_);  // its final size before any recording
  }

  Tensor& input() override { return values_[0].bf16; }
  const Tensor& run() override {
    for (const auto& step : queued_) step();
    return logits_;
  }
  const Tensor& output() const override { return logits_; }
  std::string describe() const override { return described_.str(); }
  int eight_bit_convolutions() const override { return eight_bit_convs_; }

 private:
  struct Value {
    Shape shape;      // batched: (N, C, H, W) or (N, F)
    Tensor bf16;      // channels-last where 4-D
    Tensor bytes;     // 8-bit (u8 storage of int8 or e4m3 bytes), channels-last
    float scale = 0;  // q = x * scale; 0 where no range was calibrated (never stored in 8 bits)
  };

  Tensor device_floats(const std::vector<float>& v, Shape shape) const {
    return Tensor::from_floats(v, std::move(shape)).to(ctx_.tensors);
  }
  // f32 host values (nchw-ordered `shape`) in bf16, in `layout`, on the device.
  Tensor device_bf16(const Tensor& host, Layout layout) const {
    const Tensor f32 = host.to(ctx_.tensors);
    Tensor out(host.shape(), DType::bf16, ctx_.tensors, layout);
    ops_.cast(f32, out);
    return out;
  }

  void add_step(const EightBitStep& s, int out) {
    using Kind = EightBitStep::Kind;
    switch (s.kind) {
      case Kind::conv: add_conv(s, out); break;
      case Kind::linear: add_linear(s, out); break;
      case Kind::max_pool:
      case Kind::avg_pool: add_pool(s, out); break;
      case Kind::flatten: add_flatten(s, out); break;
    }
  }

  // The value in 8 bits, quantized from its bf16 form on first need.
  const Tensor& bytes_of(int v) {
    Value& val = values_[v];
    if (!val.bytes.defined()) {
      CONVOY_CHECK(val.scale > 0, "8-bit plan: a value without a calibrated range read in 8 bits");
      val.bytes = Tensor(val.shape, DType::u8, ctx_.tensors, Layout::nhwc);
      queued_.push_back([this, x = val.bf16, y = val.bytes, scale = val.scale]() mutable {
        kernels::quantize_bf16(x.raw(), y.raw(), x.numel(), scale, byte8(type_), ctx_.stream);
      });
    }
    return val.bytes;
  }
  // The value in bf16, dequantized from its 8-bit form on first need.
  const Tensor& bf16_of(int v) {
    Value& val = values_[v];
    if (!val.bf16.defined()) {
      val.bf16 = Tensor(val.shape, DType::bf16, ctx_.tensors, val.shape.size() == 4 ? Layout::nhwc : Layout::nchw);
      queued_.push_back([this, x = val.bytes, y = val.bf16, inv = 1.0f / val.scale]() mutable {
        kernels::dequantize_to_bf16(x.raw(), y.raw(), x.numel(), inv, byte8(type_), ctx_.stream);
      });
    }
    return val.bf16;
  }

  // Why a convolution cannot run in 8 bits here ("" where it can).
  std::string why_not_8bit(const EightBitStep& s) const {
    const int64_t k = s.weight.dim(0), c = s.weight.dim(1);
    if (s.conv.groups != 1) return "grouped";
    if (c % kChannelMultiple || k % kChannelMultiple)
      return std::to_string(c) + " -> " + std::to_string(k) + " channels, not multiples of " +
             std::to_string(kChannelMultiple);
    if (s.range <= 0) return "the logits";
    if (values_[s.input].scale <= 0) return "its input has no calibrated range";
    if (s.residual >= 0 && values_[s.residual].scale <= 0) return "its residual has no calibrated range";
    return "";
  }

  void add_conv(const EightBitStep& s, int out) {
    std::string why = why_not_8bit(s);
    if (why.empty() && add_conv_8bit(s, out)) {
      ++eight_bit_convs_;
      described_ << s.name << ": " << eight_bit_name(type_) << " convolution" << (s.residual >= 0 ? " + residual" : "")
                 << (s.relu ? " + ReLU" : "") << " (cuDNN, one kernel)\n";
      return;
    }
    if (why.empty()) why = "cuDNN built no 8-bit plan for it";
    if (s.range > 0 && s.residual < 0) {
      add_conv_bf16_to_8bit(s, out);
      described_ << s.name << ": bf16 convolution (" << why << "), its bias, ReLU and quantization in one pass\n";
      return;
    }
    add_conv_bf16(s, out);
    described_ << s.name << ": bf16 convolution (" << why << ")\n";
  }

  bool add_conv_8bit(const EightBitStep& s, int out) {
    const Value& in = values_[s.input];
    const int64_t n = in.shape[0], c = in.shape[1], h = in.shape[2], w = in.shape[3];
    const int64_t k = s.weight.dim(0), r = s.weight.dim(2), ss = s.weight.dim(3);
    const int64_t p = s.shape.at(1), q = s.shape.at(2);
    // Per output channel: its own weight scale (q_w = w * wscale), the epilogue's scale from the
    // int32/f32 sum to the output's steps, the bias and the residual in those steps.
    const float y_scale = qmax_ / s.range;
    const float* wf = s.weight.data<float>();
    const float* bf = s.bias.data<float>();
    const int64_t per_k = c * r * ss;
    std::vector<uint8_t> wq(static_cast<size_t>(k * per_k));
    std::vector<float> scale(k), bias(k), residual_scale(k);
    for (int64_t o = 0; o < k; ++o) {
      float m = 0;
      for (int64_t j = 0; j < per_k; ++j) m = std::max(m, std::fabs(wf[o * per_k + j]));
      const float wscale = m > 0 ? qmax_ / m : 1.0f;
      // (K, C, R, S) -> channels-last (K, R, S, C)
      for (int64_t ci = 0; ci < c; ++ci)
        for (int64_t ri = 0; ri < r; ++ri)
          for (int64_t si = 0; si < ss; ++si)
            wq[((o * r + ri) * ss + si) * c + ci] = weight_byte(wf[((o * c + ci) * r + ri) * ss + si] * wscale, type_);
      scale[o] = y_scale / (in.scale * wscale);
      bias[o] = bf[o] * y_scale;
      residual_scale[o] = s.residual >= 0 ? y_scale / values_[s.residual].scale : 0.0f;
    }
    Tensor w_host = Tensor::empty({k, c, r, ss}, DType::u8);
    std::memcpy(w_host.data<uint8_t>(), wq.data(), wq.size());
    Tensor w_dev = w_host.to(ctx_.tensors).with_layout(Layout::nhwc);
    Tensor scale_dev = device_floats(scale, {k}), bias_dev = device_floats(bias, {k}),
           rscale_dev = device_floats(residual_scale, {k});
    const Tensor x = bytes_of(s.input);
    const Tensor residual = s.residual >= 0 ? bytes_of(s.residual) : Tensor();
    Tensor y({n, k, p, q}, DType::u8, ctx_.tensors, Layout::nhwc);

    GraphConvSpec spec;
    spec.quantized = quant_type(type_);
    spec.x = {n, c, h, w};
    spec.w = {k, c, r, ss};
    spec.y = {n, k, p, q};
    spec.x_layout = spec.w_layout = spec.y_layout = Layout::nhwc;
    spec.pad = {s.conv.pad_h, s.conv.pad_w};
    spec.stride = {s.conv.stride_h, s.conv.stride_w};
    spec.dilation = {s.conv.dilation_h, s.conv.dilation_w};
    spec.bias = true;
    spec.residual = s.residual >= 0;
    spec.relu = s.relu;
    const GraphConvOperands operands{bias_dev.raw(), residual.defined() ? residual.raw() : nullptr, scale_dev.raw(),
                                     residual.defined() ? rscale_dev.raw() : nullptr};
    // cuDNN 9.14's fused 8-bit engines are all compiled at run time: at least one is allowed.
    const int compiled = std::max(1, ctx_.tunables.cudnn_compiled.value_or(kCudnnCompiledDefault));
    std::unique_ptr<GraphConvPlan> plan = GraphConvPlan::build(
        ctx_.cudnn, spec, GraphConvChoice{ctx_.benchmark, ctx_.deterministic, workspace_limit(), compiled}, x.raw(),
        w_dev.raw(), y.raw(), [this](size_t bytes) { return workspace_.get(bytes); }, operands);
    if (!plan) return false;
    workspace_bytes_ = std::max(workspace_bytes_, plan->workspace());
    GraphConvPlan* run_plan = plan.get();
    plans_.push_back(std::move(plan));
    queued_.push_back([this, run_plan, x, w_dev, y, residual, scale_dev, bias_dev, rscale_dev, operands]() mutable {
      run_plan->run(ctx_.cudnn, x.raw(), w_dev.raw(), y.raw(), workspace_.get(run_plan->workspace()), operands);
    });
    Value& o = values_[out];
    o.shape = {n, k, p, q};
    o.bytes = y;
    o.scale = y_scale;
    return true;
  }

  void add_conv_bf16(const EightBitStep& s, int out) {
    const Tensor x = bf16_of(s.input);
    const Tensor residual = s.residual >= 0 ? bf16_of(s.residual) : Tensor();
    const Tensor w = device_bf16(s.weight, Layout::nhwc);
    const Tensor bias32 = s.bias.to(ctx_.tensors);
    const Tensor bias16 = device_bf16(s.bias, Layout::nchw);
    const Value& in = values_[s.input];
    Value& o = values_[out];
    o.shape = {in.shape[0], s.shape.at(0), s.shape.at(1), s.shape.at(2)};
    o.bf16 = Tensor(o.shape, DType::bf16, ctx_.tensors, Layout::nhwc);
    o.scale = s.range > 0 ? qmax_ / s.range : 0;
    queued_.push_back([this, p = s.conv, relu = s.relu, x, w, bias32, bias16, residual, y = o.bf16]() mutable {
      const Tensor* r = residual.defined() ? &residual : nullptr;
      if (ops_.conv2d_forward_fused(p, x, w, bias32, r, relu, y)) return;
      ops_.conv2d_forward(p, x, w, bias16, y);  // the stem's GEMM, say: the epilogue after it
      if (r) ops_.add(y, *r, y, relu);
      else if (relu) ops_.activation_forward(Activation::relu, 0.0f, y, y);
    });
  }

  // A bf16 convolution whose output has a calibrated range (the stem): the convolution alone,
  // then its bias, ReLU and quantization in one pass, so that what follows (the stem's max pool,
  // the first 8-bit convolutions) reads 8 bits. ResNet-50 b256 on the H200: the stem's separate
  // bias and ReLU passes, bf16 pool and quantization took 1.7 ms of a 7.8 ms int8 step.
  void add_conv_bf16_to_8bit(const EightBitStep& s, int out) {
    const Tensor x = bf16_of(s.input);
    const Tensor w = device_bf16(s.weight, Layout::nhwc);
    const Tensor bias = s.bias.to(ctx_.tensors);
    const Value& in = values_[s.input];
    Value& o = values_[out];
    o.shape = {in.shape[0], s.shape.at(0), s.shape.at(1), s.shape.at(2)};
    o.scale = qmax_ / s.range;
    o.bytes = Tensor(o.shape, DType::u8, ctx_.tensors, Layout::nhwc);
    Tensor raw(o.shape, DType::bf16, ctx_.tensors, Layout::nhwc);
    queued_.push_back([this, p = s.conv, relu = s.relu, x, w, bias, raw, y = o.bytes, scale = o.scale]() mutable {
      ops_.conv2d_forward(p, x, w, Tensor(), raw);
      kernels::bias_relu_quantize_bf16(raw.raw(), static_cast<const float*>(bias.raw()), y.raw(), raw.numel(), raw.dim(1), relu, scale,
                                       byte8(type_), ctx_.stream);
    });
  }

  void add_pool(const EightBitStep& s, int out) {
    const Value& in = values_[s.input];
    const int64_t n = in.shape[0], c = in.shape[1], h = in.shape[2], w = in.shape[3];
    const Pool2dParams& pp = s.pool;
    const bool global = pp.kernel_h == h && pp.kernel_w == w && pp.pad_h == 0 && pp.pad_w == 0;
    const bool eight = in.bytes.defined();  // made in 8 bits (or already quantized for a reader)
    Value& o = values_[out];
    o.shape = {n, c, s.shape.at(1), s.shape.at(2)};
    o.scale = in.scale;  // a maximum or a mean stays within the input's range
    if (eight && pp.kind == PoolKind::max) {
      o.bytes = Tensor(o.shape, DType::u8, ctx_.tensors, Layout::nhwc);
      queued_.push_back([this, x = in.bytes, y = o.bytes, n, h, w, c, pp, oh = o.shape[2], ow = o.shape[3]]() mutable {
        kernels::max_pool_8bit(x.raw(), y.raw(), n, h, w, c, oh, ow, static_cast<int>(pp.kernel_h),
                               static_cast<int>(pp.kernel_w), static_cast<int>(pp.stride_h),
                               static_cast<int>(pp.stride_w), static_cast<int>(pp.pad_h), static_cast<int>(pp.pad_w),
                               byte8(type_), ctx_.stream);
      });
      described_ << s.name << ": " << eight_bit_name(type_) << " max pool\n";
      return;
    }
    if (eight && global && pp.kind == PoolKind::avg) {
      o.bf16 = Tensor(o.shape, DType::bf16, ctx_.tensors, Layout::nhwc);
      queued_.push_back([this, x = in.bytes, y = o.bf16, n, hw = h * w, c, inv = 1.0f / in.scale]() mutable {
        kernels::global_avg_pool_8bit(x.raw(), y.raw(), n, hw, c, inv, byte8(type_), ctx_.stream);
      });
      described_ << s.name << ": global average of " << eight_bit_name(type_) << " values, to bf16\n";
      return;
    }
    const Tensor x = bf16_of(s.input);
    o.bf16 = Tensor(o.shape, DType::bf16, ctx_.tensors, Layout::nhwc);
    queued_.push_back([this, pp, x, y = o.bf16]() mutable {
      Tensor unused;
      ops_.pool2d_forward(pp, x, y, unused, false);
    });
    described_ << s.name << ": bf16 pool\n";
  }

  void add_flatten(const EightBitStep& s, int out) {
    const Tensor x = bf16_of(s.input);
    Value& o = values_[out];
    const int64_t n = x.dim(0), features = x.numel() / n;
    o.shape = {n, features};
    o.scale = values_[s.input].scale;
    if (x.ndim() == 4 && x.layout() == Layout::nhwc && x.dim(2) * x.dim(3) > 1) {
      // PyTorch's flatten order is (C, H, W): channels-last values are reordered first.
      Tensor nchw(x.shape(), DType::bf16, ctx_.tensors, Layout::nchw);
      queued_.push_back([this, x, nchw]() mutable { ops_.cast(x, nchw); });
      o.bf16 = nchw.reshape(o.shape);
    } else {
      o.bf16 = x.with_layout(Layout::nchw).reshape(o.shape);
    }
    described_ << s.name << ": flatten\n";
  }

  void add_linear(const EightBitStep& s, int out) {
    const Tensor x = bf16_of(s.input);
    CONVOY_CHECK(x.ndim() == 2, "8-bit plan: linear layer " + s.name + " reads a 4-D value");
    const Tensor w = device_bf16(s.weight, Layout::nchw);
    const Tensor b = device_bf16(s.bias, Layout::nchw);
    Value& o = values_[out];
    o.shape = {x.dim(0), s.weight.dim(0)};
    o.bf16 = Tensor(o.shape, DType::bf16, ctx_.tensors);
    o.scale = s.range > 0 ? qmax_ / s.range : 0;
    queued_.push_back([this, x, w, b, relu = s.relu, y = o.bf16]() mutable {
      ops_.linear_forward(x, w, b, y);
      if (relu) ops_.activation_forward(Activation::relu, 0.0f, y, y);
    });
    described_ << s.name << ": bf16 linear\n";
  }

  CudaContext ctx_;
  CudaOps& ops_;
  EightBitType type_;
  float qmax_;
  std::vector<Value> values_;                  // 0: the input; i + 1: step i's output
  std::vector<std::function<void()>> queued_;  // what run() queues, in order
  std::vector<std::unique_ptr<GraphConvPlan>> plans_;
  ScratchBuffer workspace_;
  size_t workspace_bytes_ = 0;
  Tensor logits_;
  std::ostringstream described_;
  int eight_bit_convs_ = 0;
};

}  // namespace

std::unique_ptr<CompiledForward> compile_eight_bit(const CudaContext& ctx, CudaOps& ops, const EightBitGraph& graph,
                                                   int64_t batch) {
  return std::make_unique<CudaEightBitForward>(ctx, ops, graph, batch);
}

}  // namespace convoy::cuda
