// The softmax layer's softmax over channels and nearest/bilinear upsampling, forward and
// backward: (N, C) and (N, C, H, W) in both layouts, logits up to 1000 (the maximum must be
// subtracted first), whole factors, rectangular factors, sizes that are no multiple (bilinear
// up and down) and outputs of one pixel along an axis.
#include <memory>

#include "tests/ops/op_cases.h"

namespace convoy::optest {
namespace {

// ---- softmax over channels ------------------------------------------------------------------

struct SoftmaxShape {
  const char* name;
  Shape x;
  double scale;  // values uniform in [-scale, scale)
};

const SoftmaxShape kSoftmaxShapes[] = {
    {"n4_c10", {4, 10}, 3.0},
    {"n3_c5_large", {3, 5}, 1000.0},
    {"n2_c3_4x5", {2, 3, 4, 5}, 4.0},
    {"n2_c16_3x3", {2, 16, 3, 3}, 4.0},
    {"n1_c1_2x2", {1, 1, 2, 2}, 2.0},  // one channel: every probability 1, every gradient 0
    {"n2_c4_3x2_large", {2, 4, 3, 2}, 500.0},
};

// Probabilities within one rounding of the dtype; the backward's sum over C adds C of them.
constexpr Tolerance kSoftmaxTol{1e-5, 2e-2, 5e-3};

struct SoftmaxData {
  Vec x, dy;
  SoftmaxData(const SoftmaxShape& k, DType values)
      : x(random_values(k.x, 31, values, -k.scale, k.scale)), dy(random_values(k.x, 32, values)) {}
};

OpCase softmax_base(const char* prefix, OpKind op, const SoftmaxShape& k) {
  OpCase oc;
  oc.name = std::string(prefix) + "/" + k.name;
  oc.op = op;
  // Layouts mean something in 4-D only: an (N, C) case in "nhwc" would be the nchw run again.
  oc.layouts = k.x.size() == 4 ? std::vector<Layout>{Layout::nchw, Layout::nhwc} : std::vector<Layout>{Layout::nchw};
  oc.tol = kSoftmaxTol;
  return oc;
}

OpCase softmax_forward_case(const SoftmaxShape& k) {
  OpCase oc = softmax_base("channel_softmax_forward", OpKind::channel_softmax_forward, k);
  oc.prepare = [k](Backend& be, const Variant& v, DType values) {
    struct State { Tensor x, y; };
    auto s = std::make_shared<State>();
    const Layout layout = layout_for(k.x, v.layout);
    s->x = device_tensor(be, SoftmaxData(k, values).x, k.x, v.dtype, layout);
    s->y = poisoned(be, k.x, v.dtype, layout);
    return Prepared{[&be, s] { be.ops().channel_softmax_forward(s->x, s->y); },
                    [s] { return Outputs{{"y", read(s->y)}}; }};
  };
  oc.reference = [k](const Variant&, DType values) {
    return Outputs{{"y", ref::channel_softmax(SoftmaxData(k, values).x, k.x)}};
  };
  return oc;
}

OpCase softmax_backward_case(const SoftmaxShape& k) {
  OpCase oc = softmax_base("channel_softmax_backward", OpKind::channel_softmax_backward, k);
  // y is the reference's softmax rounded to the dtype, so every backend reads the same y.
  auto y_of = [k](DType values) {
    Vec y = ref::channel_softmax(SoftmaxData(k, values).x, k.x);
    for (double& v : y) v = ref::round_to(v, values);
    return y;
  };
  oc.prepare = [k, y_of](Backend& be, const Variant& v, DType values) {
    struct State { Tensor y, dy, dx; };
    auto s = std::make_shared<State>();
    const Layout layout = layout_for(k.x, v.layout);
    s->y = device_tensor(be, y_of(values), k.x, v.dtype, layout);
    s->dy = device_tensor(be, SoftmaxData(k, values).dy, k.x, v.dtype, layout);
    s->dx = poisoned(be, k.x, v.dtype, layout);
    return Prepared{[&be, s] { be.ops().channel_softmax_backward(s->y, s->dy, s->dx); },
                    [s] { return Outputs{{"dx", read(s->dx)}}; }};
  };
  oc.reference = [k, y_of](const Variant&, DType values) {
    return Outputs{{"dx", ref::channel_softmax_backward(y_of(values), SoftmaxData(k, values).dy, k.x)}};
  };
  return oc;
}

// ---- upsample -------------------------------------------------------------------------------

struct UpsampleShape {
  const char* name;
  UpsampleMode mode;
  Shape x;       // (N, C, H, W)
  int64_t p, q;  // the output's H and W
};

constexpr UpsampleMode kNearest = UpsampleMode::nearest, kBilinear = UpsampleMode::bilinear;

const UpsampleShape kUpsampleShapes[] = {
    {"nearest_x2", kNearest, {2, 3, 4, 5}, 8, 10},
    {"nearest_x3x2", kNearest, {1, 2, 3, 4}, 9, 8},
    {"nearest_x1", kNearest, {2, 2, 3, 3}, 3, 3},
    {"nearest_x2_c16", kNearest, {2, 16, 3, 4}, 6, 8},
    {"bilinear_x2", kBilinear, {2, 3, 4, 5}, 8, 10},
    {"bilinear_x3x4", kBilinear, {1, 2, 3, 2}, 9, 8},
    {"bilinear_size_7x9_from_3x4", kBilinear, {2, 2, 3, 4}, 7, 9},
    {"bilinear_down_5x7_to_3x4", kBilinear, {2, 3, 5, 7}, 3, 4},
    {"bilinear_to_one_pixel", kBilinear, {1, 2, 4, 3}, 1, 5},
    {"bilinear_x2_c16", kBilinear, {2, 16, 4, 3}, 8, 6},
};

// Bilinear: four products in f32; the backward sums up to ~(2 scale)^2 of them into each input.
constexpr Tolerance kUpsampleTol{1e-5, 2e-2, 5e-3};

struct UpsampleData {
  Shape ys;
  Vec x, dy;
  UpsampleData(const UpsampleShape& k, DType values)
      : ys{k.x[0], k.x[1], k.p, k.q}, x(random_values(k.x, 41, values)), dy(random_values(ys, 42, values)) {}
};

OpCase upsample_base(const char* prefix, OpKind op, const UpsampleShape& k) {
  OpCase oc;
  oc.name = std::string(prefix) + "/" + k.name;
  oc.op = op;
  oc.layouts = {Layout::nchw, Layout::nhwc};
  oc.tol = kUpsampleTol;
  return oc;
}

OpCase upsample_forward_case(const UpsampleShape& k) {
  OpCase oc = upsample_base("upsample_forward", OpKind::upsample_forward, k);
  oc.prepare = [k](Backend& be, const Variant& v, DType values) {
    const UpsampleData d(k, values);
    struct State { Tensor x, y; };
    auto s = std::make_shared<State>();
    s->x = device_tensor(be, d.x, k.x, v.dtype, v.layout);
    s->y = poisoned(be, d.ys, v.dtype, v.layout);
    return Prepared{[&be, k, s] { be.ops().upsample_forward(k.mode, s->x, s->y); },
                    [s] { return Outputs{{"y", read(s->y)}}; }};
  };
  oc.reference = [k](const Variant&, DType values) {
    return Outputs{{"y", ref::upsample_forward(k.mode, UpsampleData(k, values).x, k.x, k.p, k.q)}};
  };
  return oc;
}

OpCase upsample_backward_case(const UpsampleShape& k) {
  OpCase oc = upsample_base("upsample_backward", OpKind::upsample_backward, k);
  oc.prepare = [k](Backend& be, const Variant& v, DType values) {
    const UpsampleData d(k, values);
    struct State { Tensor dy, dx; };
    auto s = std::make_shared<State>();
    s->dy = device_tensor(be, d.dy, d.ys, v.dtype, v.layout);
    s->dx = poisoned(be, k.x, v.dtype, v.layout);
    return Prepared{[&be, k, s] { be.ops().upsample_backward(k.mode, s->dy, s->dx); },
                    [s] { return Outputs{{"dx", read(s->dx)}}; }};
  };
  oc.reference = [k](const Variant&, DType values) {
    return Outputs{{"dx", ref::upsample_backward(k.mode, UpsampleData(k, values).dy, k.x, k.p, k.q)}};
  };
  return oc;
}

}  // namespace

std::vector<OpCase> resample_cases() {
  std::vector<OpCase> cases;
  for (const SoftmaxShape& k : kSoftmaxShapes) cases.push_back(softmax_forward_case(k));
  for (const SoftmaxShape& k : kSoftmaxShapes) cases.push_back(softmax_backward_case(k));
  for (const UpsampleShape& k : kUpsampleShapes) cases.push_back(upsample_forward_case(k));
  for (const UpsampleShape& k : kUpsampleShapes) cases.push_back(upsample_backward_case(k));
  return cases;
}

}  // namespace convoy::optest
