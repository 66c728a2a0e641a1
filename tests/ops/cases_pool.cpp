// Pooling, max and average (count_include_pad=False), forward and backward: square and
// rectangular windows, overlapping and padded ones, global average, batch 1 and strides that
// leave pixels over. Inputs are distinct
// within each plane and exact in every dtype, so a max window has one maximum everywhere.
#include <memory>

#include "tests/ops/op_cases.h"

namespace convoy::optest {
namespace {

struct PoolShape {
  const char* name;
  Shape x;  // (N, C, H, W)
  Pool2dParams p;
  bool relu_ties = false;  // x through a ReLU first: windows of equal zeros (the first one takes the gradient)
};

Pool2dParams pool(PoolKind kind, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw) {
  Pool2dParams p;
  p.kind = kind, p.kernel_h = kh, p.kernel_w = kw, p.stride_h = sh, p.stride_w = sw;
  p.pad_h = ph, p.pad_w = pw;
  return p;
}
constexpr PoolKind kMax = PoolKind::max, kAvg = PoolKind::avg;

const PoolShape kShapes[] = {
    {"max_2x2_s2", {2, 3, 8, 8}, pool(kMax, 2, 2, 2, 2, 0, 0)},
    {"max_3x3_s2_pad1_overlap", {2, 2, 9, 7}, pool(kMax, 3, 3, 2, 2, 1, 1)},
    {"max_3x3_s1_pad1_batch1", {1, 3, 6, 5}, pool(kMax, 3, 3, 1, 1, 1, 1)},
    {"max_2x2_s2_leftover", {2, 2, 7, 7}, pool(kMax, 2, 2, 2, 2, 0, 0)},
    {"max_2x3_s1x2_pad0x1", {1, 2, 6, 9}, pool(kMax, 2, 3, 1, 2, 0, 1)},
    {"avg_2x2_s2", {2, 3, 8, 8}, pool(kAvg, 2, 2, 2, 2, 0, 0)},
    {"avg_3x3_s2_pad1_exclude_padding", {2, 2, 9, 7}, pool(kAvg, 3, 3, 2, 2, 1, 1)},
    {"avg_3x2_s2x1_pad1x0", {1, 2, 7, 6}, pool(kAvg, 3, 2, 2, 1, 1, 0)},
    {"avg_global_5x5", {2, 4, 5, 5}, pool(kAvg, 5, 5, 1, 1, 0, 0)},
    {"max_3x3_s2_pad1_c4", {2, 4, 9, 7}, pool(kMax, 3, 3, 2, 2, 1, 1)},
    {"max_3x3_s1_pad1_5x6", {1, 2, 5, 6}, pool(kMax, 3, 3, 1, 1, 1, 1)},
    {"avg_3x3_s1_pad1", {2, 3, 7, 5}, pool(kAvg, 3, 3, 1, 1, 1, 1)},
    {"avg_2x2_s2_leftover", {3, 2, 7, 7}, pool(kAvg, 2, 2, 2, 2, 0, 0)},
    {"avg_global_7x7", {2, 16, 7, 7}, pool(kAvg, 7, 7, 7, 7, 0, 0)},
    {"avg_3x2_s2x1_pad1x0_9x8", {2, 3, 9, 8}, pool(kAvg, 3, 2, 2, 1, 1, 0)},
    // channels a multiple of 8: the CUDA kernels' 16-byte nhwc paths (ResNet's stem pool)
    {"max_3x3_s2_pad1_c16", {2, 16, 9, 7}, pool(kMax, 3, 3, 2, 2, 1, 1)},
    {"max_2x2_s2_c8", {2, 8, 8, 8}, pool(kMax, 2, 2, 2, 2, 0, 0)},
    {"avg_3x3_s2_pad1_c8", {2, 8, 9, 7}, pool(kAvg, 3, 3, 2, 2, 1, 1)},
    {"max_3x3_s2_pad1_c16_relu_ties", {2, 16, 9, 7}, pool(kMax, 3, 3, 2, 2, 1, 1), true},
    {"max_2x2_s2_c8_relu_ties", {2, 8, 8, 8}, pool(kMax, 2, 2, 2, 2, 0, 0), true},
};

struct PoolData {
  Shape ys;
  Vec x, dy;
  PoolData(const PoolShape& c, DType values)
      : ys(ref::pool2d_output_shape(c.p, c.x)), x(distinct_planes(c.x, 11)), dy(random_values(ys, 12, values)) {
    if (c.relu_ties)
      for (double& v : x) v = v > 0 ? v : 0;
  }
};

// f32: a window's maximum is exact and its mean one short sum. bf16 and f16: the GPU bounds
// (a backward may round each overlapping window's share into dx).
constexpr Tolerance kPoolTol{1e-6, 2e-2, 5e-3};

OpCase base(const char* op_prefix, OpKind op, const PoolShape& c) {
  OpCase oc;
  oc.name = std::string(op_prefix) + "/" + c.name;
  oc.op = op;
  oc.layouts = {Layout::nchw, Layout::nhwc};
  oc.tol = kPoolTol;
  return oc;
}

// The training forward (which may keep a record for backward) and the inference forward.
OpCase forward_case(const PoolShape& c) {
  OpCase oc = base("pool2d_forward", OpKind::pool2d_forward, c);
  oc.prepare = [c](Backend& be, const Variant& v, DType values) {
    const PoolData d(c, values);
    struct State { Tensor x, y, workspace, y_eval, no_workspace; };
    auto s = std::make_shared<State>();
    s->x = device_tensor(be, d.x, c.x, v.dtype, v.layout);
    s->y = poisoned(be, d.ys, v.dtype, v.layout);
    s->y_eval = poisoned(be, d.ys, v.dtype, v.layout);
    return Prepared{[&be, c, s] {
                      be.ops().pool2d_forward(c.p, s->x, s->y, s->workspace, /*training=*/true);
                      be.ops().pool2d_forward(c.p, s->x, s->y_eval, s->no_workspace, /*training=*/false);
                    },
                    [s] { return Outputs{{"y (training)", read(s->y)}, {"y (inference)", read(s->y_eval)}}; },
                    2};
  };
  oc.reference = [c](const Variant&, DType values) {
    const Vec y = ref::pool2d_forward(c.p, PoolData(c, values).x, c.x);
    return Outputs{{"y (training)", y}, {"y (inference)", y}};
  };
  return oc;
}

// Backward with the training forward's record, and without it (the backend rebuilds what it
// needs from x).
OpCase backward_case(const PoolShape& c) {
  OpCase oc = base("pool2d_backward", OpKind::pool2d_backward, c);
  oc.prepare = [c](Backend& be, const Variant& v, DType values) {
    const PoolData d(c, values);
    struct State { Tensor x, y, workspace, dy, dx, dx_no_workspace; };
    auto s = std::make_shared<State>();
    s->x = device_tensor(be, d.x, c.x, v.dtype, v.layout);
    s->y = poisoned(be, d.ys, v.dtype, v.layout);
    be.ops().pool2d_forward(c.p, s->x, s->y, s->workspace, /*training=*/true);
    s->dy = device_tensor(be, d.dy, d.ys, v.dtype, v.layout);
    s->dx = poisoned(be, c.x, v.dtype, v.layout);
    s->dx_no_workspace = poisoned(be, c.x, v.dtype, v.layout);
    return Prepared{[&be, c, s] { be.ops().pool2d_backward(c.p, s->x, s->y, s->dy, s->workspace, s->dx); },
                    [&be, c, s] {
                      be.ops().pool2d_backward(c.p, s->x, s->y, s->dy, Tensor(), s->dx_no_workspace);
                      return Outputs{{"dx", read(s->dx)}, {"dx (no workspace)", read(s->dx_no_workspace)}};
                    }};
  };
  oc.reference = [c](const Variant&, DType values) {
    const PoolData d(c, values);
    const Vec dx = ref::pool2d_backward(c.p, d.x, c.x, d.dy);
    return Outputs{{"dx", dx}, {"dx (no workspace)", dx}};
  };
  return oc;
}

}  // namespace

std::vector<OpCase> pool_cases() {
  std::vector<OpCase> cases;
  for (const PoolShape& c : kShapes) cases.push_back(forward_case(c));
  for (const PoolShape& c : kShapes) cases.push_back(backward_case(c));
  return cases;
}

}  // namespace convoy::optest
