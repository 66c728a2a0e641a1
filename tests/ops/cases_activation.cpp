// Activations (relu, leaky relu, exact-erf gelu, sigmoid, silu, hardsigmoid, hardswish, relu6),
// forward and backward, on two 4-D batches (in both layouts), a vector and rows of odd length.
// The inputs span every kink and saturated side: [-3, 3] for the first three, [-8, 8] for the
// others (hardsigmoid and hardswish bend at -3 and 3, relu6 at 0 and 6).
#include <memory>

#include "tests/ops/op_cases.h"

namespace convoy::optest {
namespace {

const Shape kShapes[] = {{3, 4, 5, 6}, {7}, {2, 33}, {3, 5, 7, 2}};

struct Kind {
  const char* name;
  Activation act;
  float alpha;  // leaky relu's negative slope
  double range = 3.0;  // x in [-range, range]
};
const Kind kKinds[] = {{"relu", Activation::relu, 0.0f},
                       {"leaky_relu", Activation::leaky_relu, 0.1f},
                       {"gelu", Activation::gelu, 0.0f},
                       {"sigmoid", Activation::sigmoid, 0.0f, 8.0},
                       {"silu", Activation::silu, 0.0f, 8.0},
                       {"hardsigmoid", Activation::hardsigmoid, 0.0f, 8.0},
                       {"hardswish", Activation::hardswish, 0.0f, 8.0},
                       {"relu6", Activation::relu6, 0.0f, 8.0}};

struct ActData {
  Vec x, dy;
  ActData(const Kind& k, const Shape& s, DType values)
      : x(random_values(s, 31, values, -k.range, k.range)), dy(random_values(s, 32, values)) {}
};

OpCase base(const char* op_prefix, OpKind op, const Kind& k, const Shape& s) {
  OpCase oc;
  oc.name = std::string(op_prefix) + "/" + k.name + "_" + shape_name(s);
  oc.op = op;
  oc.layouts = s.size() == 4 ? std::vector<Layout>{Layout::nchw, Layout::nhwc} : std::vector<Layout>{Layout::nchw};
  return oc;
}

OpCase forward_case(const Kind& k, const Shape& shape) {
  OpCase oc = base("activation_forward", OpKind::activation_forward, k, shape);
  oc.prepare = [k, shape](Backend& be, const Variant& v, DType values) {
    const ActData d(k, shape, values);
    struct State { Tensor x, y; };
    auto s = std::make_shared<State>();
    s->x = device_tensor(be, d.x, shape, v.dtype, v.layout);
    s->y = poisoned(be, shape, v.dtype, v.layout);
    return Prepared{[&be, k, s] { be.ops().activation_forward(k.act, k.alpha, s->x, s->y); },
                    [s] { return Outputs{{"y", read(s->y)}}; }};
  };
  oc.reference = [k, shape](const Variant&, DType values) {
    return Outputs{{"y", ref::activation_forward(k.act, k.alpha, ActData(k, shape, values).x)}};
  };
  return oc;
}

// y comes from the backend's own forward, as a layer passes it.
OpCase backward_case(const Kind& k, const Shape& shape) {
  OpCase oc = base("activation_backward", OpKind::activation_backward, k, shape);
  oc.prepare = [k, shape](Backend& be, const Variant& v, DType values) {
    const ActData d(k, shape, values);
    struct State { Tensor x, y, dy, dx; };
    auto s = std::make_shared<State>();
    s->x = device_tensor(be, d.x, shape, v.dtype, v.layout);
    s->y = poisoned(be, shape, v.dtype, v.layout);
    be.ops().activation_forward(k.act, k.alpha, s->x, s->y);
    s->dy = device_tensor(be, d.dy, shape, v.dtype, v.layout);
    s->dx = poisoned(be, shape, v.dtype, v.layout);
    return Prepared{[&be, k, s] { be.ops().activation_backward(k.act, k.alpha, s->x, s->y, s->dy, s->dx); },
                    [s] { return Outputs{{"dx", read(s->dx)}}; }};
  };
  oc.reference = [k, shape](const Variant&, DType values) {
    const ActData d(k, shape, values);
    return Outputs{{"dx", ref::activation_backward(k.act, k.alpha, d.x, d.dy)}};
  };
  return oc;
}

}  // namespace

std::vector<OpCase> activation_cases() {
  std::vector<OpCase> cases;
  for (const Kind& k : kKinds)
    for (const Shape& s : kShapes) cases.push_back(forward_case(k, s));
  for (const Kind& k : kKinds)
    for (const Shape& s : kShapes) cases.push_back(backward_case(k, s));
  return cases;
}

}  // namespace convoy::optest
