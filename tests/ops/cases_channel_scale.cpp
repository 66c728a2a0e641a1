// channel_scale_forward and channel_scale_backward: squeeze-and-excitation's x * s, s one number
// per (sample, channel) as (N, C, 1, 1) or (N, C), in both layouts; the planes from 1x1 to
// 28x28 (the scale gradient's sum over a plane is the part a kernel can get wrong).
#include <memory>

#include "tests/ops/op_cases.h"

namespace convoy::optest {
namespace {

struct ScaleShape {
  Shape x;        // (N, C, H, W)
  bool s_matrix;  // s (N, C) rather than (N, C, 1, 1)
};
const ScaleShape kShapes[] = {
    {{2, 5, 7, 3}, false}, {{3, 16, 4, 4}, true}, {{2, 40, 28, 28}, false}, {{1, 3, 1, 1}, false}, {{4, 33, 5, 6}, true}};

Shape s_shape(const ScaleShape& c) {
  return c.s_matrix ? Shape{c.x[0], c.x[1]} : Shape{c.x[0], c.x[1], 1, 1};
}
std::string case_name(const ScaleShape& c) { return shape_name(c.x) + (c.s_matrix ? "_s_nc" : "_s_nc11"); }

// f32: a product, or a sum over a plane in double, each rounded once; bf16 and f16: the inputs'
// and the result's roundings.
constexpr Tolerance kScaleTol{1e-6, 1.5e-2, 3e-3};

OpCase forward_case(const ScaleShape& c) {
  OpCase oc;
  oc.name = "channel_scale_forward/" + case_name(c);
  oc.op = OpKind::channel_scale_forward;
  oc.layouts = {Layout::nchw, Layout::nhwc};
  oc.tol = kScaleTol;
  oc.prepare = [c](Backend& be, const Variant& v, DType values) {
    struct State { Tensor x, s, y; };
    auto st = std::make_shared<State>();
    const Shape ss = s_shape(c);
    st->x = device_tensor(be, random_values(c.x, 71, values), c.x, v.dtype, v.layout);
    st->s = device_tensor(be, random_values(ss, 72, values), ss, v.dtype, layout_for(ss, v.layout));
    st->y = poisoned(be, c.x, v.dtype, v.layout);
    return Prepared{[&be, st] { be.ops().channel_scale_forward(st->x, st->s, st->y); },
                    [st] { return Outputs{{"y", read(st->y)}}; }};
  };
  oc.reference = [c](const Variant&, DType values) {
    return Outputs{{"y", ref::channel_scale_forward(random_values(c.x, 71, values), c.x,
                                                     random_values(s_shape(c), 72, values))}};
  };
  return oc;
}

// want_dx / want_ds: which gradients are asked for (the first SE block's x needs none, say).
OpCase backward_case(const ScaleShape& c, bool want_dx, bool want_ds) {
  OpCase oc;
  oc.name = "channel_scale_backward/" + case_name(c) + (want_dx ? "_dx" : "") + (want_ds ? "_ds" : "");
  oc.op = OpKind::channel_scale_backward;
  oc.layouts = {Layout::nchw, Layout::nhwc};
  oc.tol = kScaleTol;
  oc.prepare = [=](Backend& be, const Variant& v, DType values) {
    struct State { Tensor x, s, dy, dx, ds; };
    auto st = std::make_shared<State>();
    const Shape ss = s_shape(c);
    const Layout sl = layout_for(ss, v.layout);
    st->x = device_tensor(be, random_values(c.x, 71, values), c.x, v.dtype, v.layout);
    st->s = device_tensor(be, random_values(ss, 72, values), ss, v.dtype, sl);
    st->dy = device_tensor(be, random_values(c.x, 73, values), c.x, v.dtype, v.layout);
    if (want_dx) st->dx = poisoned(be, c.x, v.dtype, v.layout);
    if (want_ds) st->ds = poisoned(be, ss, v.dtype, sl);
    return Prepared{[&be, st] { be.ops().channel_scale_backward(st->x, st->s, st->dy, st->dx, st->ds); },
                    [=] {
                      Outputs out;
                      if (want_dx) out.push_back({"dx", read(st->dx)});
                      if (want_ds) out.push_back({"ds", read(st->ds)});
                      return out;
                    }};
  };
  oc.reference = [=](const Variant&, DType values) {
    const ref::ChannelScaleGrads g =
        ref::channel_scale_backward(random_values(c.x, 71, values), c.x, random_values(s_shape(c), 72, values),
                                    random_values(c.x, 73, values));
    Outputs out;
    if (want_dx) out.push_back({"dx", g.dx});
    if (want_ds) out.push_back({"ds", g.ds});
    return out;
  };
  return oc;
}

}  // namespace

std::vector<OpCase> channel_scale_cases() {
  std::vector<OpCase> cases;
  for (const ScaleShape& c : kShapes) cases.push_back(forward_case(c));
  for (const ScaleShape& c : kShapes) cases.push_back(backward_case(c, true, true));
  cases.push_back(backward_case(kShapes[2], false, true));
  cases.push_back(backward_case(kShapes[4], true, false));
  return cases;
}

}  // namespace convoy::optest
