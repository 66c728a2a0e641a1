// Convolution: forward, backward data, backward weights (and bias), one case per op and shape.
// The shapes cover padding, stride, dilation, groups, depthwise and pointwise kernels,
// non-square inputs and kernels, batch 1, strides that leave pixels over and wide channels.
#include <memory>
#include <string_view>

#include "tests/ops/op_cases.h"

namespace convoy::optest {
namespace {

struct ConvShape {
  const char* name;
  Shape x;  // (N, C, H, W)
  int64_t k, r, s;
  Conv2dParams p;
  bool bias;
};

Conv2dParams conv(int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh = 1, int64_t dw = 1,
                  int64_t groups = 1) {
  Conv2dParams p;
  p.stride_h = sh, p.stride_w = sw, p.pad_h = ph, p.pad_w = pw;
  p.dilation_h = dh, p.dilation_w = dw, p.groups = groups;
  return p;
}

const ConvShape kShapes[] = {
    {"basic3x3_pad1_bias", {2, 3, 8, 8}, 4, 3, 3, conv(1, 1, 1, 1), true},
    {"stride2_pad1_nonsquare", {1, 3, 9, 7}, 5, 3, 2, conv(2, 2, 1, 1), false},
    {"dilation2", {2, 2, 10, 9}, 3, 3, 3, conv(1, 1, 2, 2, 2, 2), true},
    {"groups2", {2, 4, 7, 7}, 6, 3, 3, conv(1, 1, 1, 1, 1, 1, 2), true},
    {"depthwise_stride2", {2, 6, 8, 8}, 6, 3, 3, conv(2, 2, 1, 1, 1, 1, 6), false},
    {"pointwise_batch1", {1, 8, 5, 5}, 4, 1, 1, conv(1, 1, 0, 0), true},
    {"lenet_5x5", {3, 1, 28, 28}, 6, 5, 5, conv(1, 1, 0, 0), true},
    {"mixed_stride_pad_dilation", {2, 3, 11, 10}, 4, 3, 3, conv(2, 1, 0, 2, 1, 2), true},
    {"stride2_leftover", {2, 2, 8, 8}, 3, 3, 3, conv(2, 2, 0, 0), true},
    {"wide_channels", {2, 32, 6, 6}, 16, 3, 3, conv(1, 1, 1, 1), true},
    {"batch1_odd_stride2_groups2", {1, 4, 7, 9}, 6, 3, 3, conv(2, 2, 1, 1, 1, 1, 2), false},
    {"depthwise_dilation2", {3, 8, 10, 10}, 8, 3, 3, conv(1, 1, 2, 2, 2, 2, 8), true},
    {"pointwise_stride2_odd", {2, 5, 11, 6}, 7, 1, 1, conv(2, 2, 0, 0), true},
    {"asymmetric_5x3", {2, 6, 9, 9}, 4, 5, 3, conv(1, 2, 2, 1), true},
    {"resnet_like_3x3", {4, 16, 14, 14}, 32, 3, 3, conv(1, 1, 1, 1), false},
    {"stem_7x7_stride2", {2, 3, 23, 23}, 8, 7, 7, conv(2, 2, 3, 3), false},
    // a narrow stem with unequal strides and padding and a bias (cuDNN pads its 4 channels to 8)
    {"stem_5x5_rect_bias", {3, 4, 13, 11}, 5, 5, 5, conv(2, 1, 2, 1), true},
    // narrow stems of 5x5 or more run as im2col + GEMM in nhwc bf16/f16 on CUDA, their matrix
    // rows padded to 8 elements; here 6 * 6 * 2 = 72 need none
    {"stem_6x6_rows_of_8", {2, 2, 14, 12}, 6, 6, 6, conv(2, 2, 2, 2), true},
    // one input channel: cuDNN's nhwc bf16 path pads the channels to 8 (and back for dw)
    {"grayscale_stem", {4, 1, 12, 12}, 16, 3, 3, conv(1, 1, 1, 1), true},
};

// The inputs of one shape, rounded to `values`. Weights, like activations, take the layout
// (channels-last weights are (K, R, S, C/groups) in memory); the bias is a plain vector.
struct ConvData {
  Shape xs, ws, ys;
  Vec x, w, b, dy;
  ConvData(const ConvShape& c, DType values)
      : xs(c.x), ws{c.k, c.x[1] / c.p.groups, c.r, c.s}, ys(ref::conv2d_output_shape(c.p, xs, ws)),
        x(random_values(xs, 1, values)), w(random_values(ws, 2, values)),
        b(random_values({c.k}, 3, values)), dy(random_values(ys, 4, values)) {}
};

// Convolutions are GEMMs: f32 on the GPU sums in cuDNN's orders (1e-4); bf16 products are exact in the f32 accumulator, the rounding of the
// result and of cuDNN's split reductions remain.
constexpr Tolerance kConvTol{1e-5, 2e-2, 5e-3, 1e-4};

OpCase base(const char* op_prefix, OpKind op, const ConvShape& c) {
  OpCase oc;
  oc.name = std::string(op_prefix) + "/" + c.name;
  oc.op = op;
  oc.layouts = {Layout::nchw, Layout::nhwc};
  oc.tol = kConvTol;
  return oc;
}

OpCase forward_case(const ConvShape& c) {
  OpCase oc = base("conv2d_forward", OpKind::conv2d_forward, c);
  oc.prepare = [c](Backend& be, const Variant& v, DType values) {
    const ConvData d(c, values);
    struct State { Tensor x, w, b, y; };
    auto s = std::make_shared<State>();
    s->x = device_tensor(be, d.x, d.xs, v.dtype, v.layout);
    s->w = device_tensor(be, d.w, d.ws, v.dtype, v.layout);
    if (c.bias) s->b = device_tensor(be, d.b, {c.k}, v.dtype);
    s->y = poisoned(be, d.ys, v.dtype, v.layout);
    return Prepared{[&be, s, p = c.p] { be.ops().conv2d_forward(p, s->x, s->w, s->b, s->y); },
                    [s] { return Outputs{{"y", read(s->y)}}; }};
  };
  oc.reference = [c](const Variant&, DType values) {
    const ConvData d(c, values);
    return Outputs{{"y", ref::conv2d_forward(c.p, d.x, d.xs, d.w, d.ws, c.bias ? &d.b : nullptr)}};
  };
  return oc;
}

// With `accumulate`, dx += the data gradient (a residual join's sum, Layer::backward_adding):
// dx then starts with values of its own, which the result must keep.
OpCase backward_data_case(const ConvShape& c, bool accumulate = false) {
  OpCase oc = base(accumulate ? "conv2d_backward_data_accumulate" : "conv2d_backward_data",
                   OpKind::conv2d_backward_data, c);
  oc.prepare = [c, accumulate](Backend& be, const Variant& v, DType values) {
    const ConvData d(c, values);
    struct State { Tensor dy, w, dx; };
    auto s = std::make_shared<State>();
    s->dy = device_tensor(be, d.dy, d.ys, v.dtype, v.layout);
    s->w = device_tensor(be, d.w, d.ws, v.dtype, v.layout);
    s->dx = accumulate ? device_tensor(be, random_values(d.xs, 5, values), d.xs, v.dtype, v.layout)
                       : poisoned(be, d.xs, v.dtype, v.layout);
    return Prepared{[&be, s, p = c.p, accumulate] { be.ops().conv2d_backward_data(p, s->dy, s->w, s->dx, accumulate); },
                    [s] { return Outputs{{"dx", read(s->dx)}}; }};
  };
  oc.reference = [c, accumulate](const Variant&, DType values) {
    const ConvData d(c, values);
    Vec dx = ref::conv2d_backward_data(c.p, d.dy, d.ys, d.w, d.ws, d.xs);
    if (accumulate) {
      const Vec before = random_values(d.xs, 5, values);
      for (size_t i = 0; i < dx.size(); ++i) dx[i] += before[i];
    }
    return Outputs{{"dx", dx}};
  };
  return oc;
}

OpCase backward_weights_case(const ConvShape& c) {
  OpCase oc = base("conv2d_backward_weights", OpKind::conv2d_backward_weights, c);
  oc.prepare = [c](Backend& be, const Variant& v, DType values) {
    const ConvData d(c, values);
    struct State { Tensor x, dy, dw, db; };
    auto s = std::make_shared<State>();
    s->x = device_tensor(be, d.x, d.xs, v.dtype, v.layout);
    s->dy = device_tensor(be, d.dy, d.ys, v.dtype, v.layout);
    s->dw = poisoned(be, d.ws, v.dtype, v.layout);
    if (c.bias) s->db = poisoned(be, {c.k}, v.dtype);
    return Prepared{[&be, s, p = c.p] { be.ops().conv2d_backward_weights(p, s->x, s->dy, s->dw, s->db); },
                    [s] {
                      Outputs out{{"dw", read(s->dw)}};
                      if (s->db.defined()) out.push_back({"db", read(s->db)});
                      return out;
                    }};
  };
  oc.reference = [c](const Variant&, DType values) {
    const ConvData d(c, values);
    Outputs out{{"dw", ref::conv2d_backward_weights(c.p, d.x, d.xs, d.dy, d.ys, d.ws)}};
    if (c.bias) out.push_back({"db", ref::conv2d_backward_bias(d.dy, d.ys)});
    return out;
  };
  return oc;
}

}  // namespace

std::vector<OpCase> conv_cases() {
  std::vector<OpCase> cases;
  for (const ConvShape& c : kShapes) cases.push_back(forward_case(c));
  for (const ConvShape& c : kShapes) cases.push_back(backward_data_case(c));
  for (const ConvShape& c : kShapes) cases.push_back(backward_weights_case(c));
  for (const ConvShape& c : kShapes)
    for (const char* name : {"stride2_pad1_nonsquare", "groups2", "pointwise_stride2_odd", "resnet_like_3x3"})
      if (std::string_view(c.name) == name) cases.push_back(backward_data_case(c, /*accumulate=*/true));
  return cases;
}

}  // namespace convoy::optest
