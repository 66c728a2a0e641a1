// add, add_inplace, concat_channels, split_channels, cast and fill, on 2-D to 4-D shapes.
// Copies, casts and fills must match the reference bit for bit.
#include <cmath>
#include <functional>
#include <memory>

#include "tests/ops/op_cases.h"

namespace convoy::optest {
namespace {

const std::vector<DType> kFloats{DType::f32, DType::bf16, DType::f16};

std::vector<Layout> layouts_of(const Shape& s) {
  return s.size() == 4 ? std::vector<Layout>{Layout::nchw, Layout::nhwc} : std::vector<Layout>{Layout::nchw};
}

// ---- add, add_inplace -----------------------------------------------------------------------

const Shape kAddShapes[] = {{3, 4, 5}, {2, 64, 16, 16}, {3, 7, 5, 9}};

// f32: one rounding of an exact sum (2^-24); bf16 and f16: one or two roundings of the result.
constexpr Tolerance kAddTol{1e-7, 1e-2, 2e-3};

// With relu: relu(a + b), a ReLU fused after the add.
OpCase add_case(const Shape& shape, bool relu) {
  OpCase oc;
  oc.name = "add/" + shape_name(shape) + (relu ? "_relu" : "");
  oc.op = OpKind::add;
  oc.layouts = layouts_of(shape);
  oc.tol = kAddTol;
  oc.prepare = [shape, relu](Backend& be, const Variant& v, DType values) {
    struct State { Tensor a, b, y; };
    auto s = std::make_shared<State>();
    s->a = device_tensor(be, random_values(shape, 51, values), shape, v.dtype, v.layout);
    s->b = device_tensor(be, random_values(shape, 52, values), shape, v.dtype, v.layout);
    s->y = poisoned(be, shape, v.dtype, v.layout);
    return Prepared{[&be, s, relu] { be.ops().add(s->a, s->b, s->y, relu); },
                    [s] { return Outputs{{"y", read(s->y)}}; }};
  };
  oc.reference = [shape, relu](const Variant&, DType values) {
    Vec y = ref::add(random_values(shape, 51, values), random_values(shape, 52, values));
    if (relu)
      for (double& e : y) e = e > 0 ? e : 0;
    return Outputs{{"y", y}};
  };
  return oc;
}

// y = a, then y += b twice (a gradient summed over three readers).
OpCase add_inplace_case(const Shape& shape) {
  OpCase oc;
  oc.name = "add_inplace/" + shape_name(shape);
  oc.op = OpKind::add_inplace;
  oc.layouts = layouts_of(shape);
  oc.tol = kAddTol;
  oc.prepare = [shape](Backend& be, const Variant& v, DType values) {
    struct State { Tensor y, b; };
    auto s = std::make_shared<State>();
    s->y = device_tensor(be, random_values(shape, 51, values), shape, v.dtype, v.layout);
    s->b = device_tensor(be, random_values(shape, 52, values), shape, v.dtype, v.layout);
    return Prepared{[&be, s] {
                      be.ops().add_inplace(s->y, s->b);
                      be.ops().add_inplace(s->y, s->b);
                    },
                    [s] { return Outputs{{"y + 2 b", read(s->y)}}; },
                    2};
  };
  oc.reference = [shape](const Variant& v, DType values) {
    const Vec b = random_values(shape, 52, values);
    // Rounded after the first add, as the backend stores y in its dtype between the calls.
    Vec y = ref::add(random_values(shape, 51, values), b);
    for (double& e : y) e = ref::round_to(e, v.dtype);
    return Outputs{{"y + 2 b", ref::add(y, b)}};
  };
  return oc;
}

// ---- concat, split --------------------------------------------------------------------------

const std::vector<Shape> kPartLists[] = {
    {{2, 1, 3, 4}, {2, 3, 3, 4}, {2, 2, 3, 4}},
    {{3, 2}, {3, 5}},  // (N, C)
    {{2, 2, 3, 5}, {2, 3, 3, 5}, {2, 1, 3, 5}},
};

Shape concat_shape(const std::vector<Shape>& parts) {
  Shape y = parts[0];
  y[1] = 0;
  for (const Shape& p : parts) y[1] += p[1];
  return y;
}

std::string parts_name(const std::vector<Shape>& parts) {
  std::string s = shape_name(parts[0]);
  for (size_t i = 1; i < parts.size(); ++i) s += "_" + std::to_string(parts[i][1]);
  return s;  // "2x1x3x4_3_2": the first part, then the others' channels
}

OpCase concat_case(const std::vector<Shape>& parts) {
  OpCase oc;
  oc.name = "concat_channels/" + parts_name(parts);
  oc.op = OpKind::concat_channels;
  oc.layouts = layouts_of(parts[0]);
  oc.tol = kExact;
  oc.prepare = [parts](Backend& be, const Variant& v, DType values) {
    struct State { std::vector<Tensor> xs; Tensor y; };
    auto s = std::make_shared<State>();
    for (size_t i = 0; i < parts.size(); ++i)
      s->xs.push_back(device_tensor(be, random_values(parts[i], 61 + i, values), parts[i], v.dtype, v.layout));
    s->y = poisoned(be, concat_shape(parts), v.dtype, v.layout);
    return Prepared{[&be, s] { be.ops().concat_channels(s->xs, s->y); }, [s] { return Outputs{{"y", read(s->y)}}; }};
  };
  oc.reference = [parts](const Variant&, DType values) {
    std::vector<Vec> xs;
    for (size_t i = 0; i < parts.size(); ++i) xs.push_back(random_values(parts[i], 61 + i, values));
    return Outputs{{"y", ref::concat_channels(xs, parts)}};
  };
  return oc;
}

OpCase split_case(const std::vector<Shape>& parts) {
  OpCase oc;
  oc.name = "split_channels/" + parts_name(parts);
  oc.op = OpKind::split_channels;
  oc.layouts = layouts_of(parts[0]);
  oc.tol = kExact;
  const Shape ys = concat_shape(parts);
  oc.prepare = [parts, ys](Backend& be, const Variant& v, DType values) {
    struct State { Tensor y; std::vector<Tensor> xs; };
    auto s = std::make_shared<State>();
    s->y = device_tensor(be, random_values(ys, 65, values), ys, v.dtype, v.layout);
    for (const Shape& p : parts) s->xs.push_back(poisoned(be, p, v.dtype, v.layout));
    return Prepared{[&be, s] { be.ops().split_channels(s->y, s->xs); },
                    [s] {
                      Outputs out;
                      for (size_t i = 0; i < s->xs.size(); ++i) out.push_back({"part " + std::to_string(i), read(s->xs[i])});
                      return out;
                    }};
  };
  oc.reference = [parts, ys](const Variant&, DType values) {
    std::vector<int64_t> channels;
    for (const Shape& p : parts) channels.push_back(p[1]);
    const std::vector<Vec> xs = ref::split_channels(random_values(ys, 65, values), ys, channels);
    Outputs out;
    for (size_t i = 0; i < xs.size(); ++i) out.push_back({"part " + std::to_string(i), xs[i]});
    return out;
  };
  return oc;
}

// ---- cast -----------------------------------------------------------------------------------

// Values that probe the rounding: magnitudes from 1e-8 to 1e4, and the edges: zeros, ties of
// bf16 and f16 (round half to even), f16's largest finite value and its overflow to infinity,
// f16 subnormals, f32 subnormals, bf16's range.
Vec cast_probe_values() {
  Vec x = ref::random_vec(4096, 101, -1.0, 1.0);
  for (size_t i = 0; i < x.size(); ++i) x[i] *= std::pow(10.0, static_cast<double>(i % 13) - 8.0);
  const Vec wide = ref::random_vec(1000, 111, -100.0, 100.0);
  x.insert(x.end(), wide.begin(), wide.end());
  for (double v : {0.0, -0.0, 65504.0, 70000.0, -1e6, 1e-7, 3e-8, 6e-8, 1.0 + 1.0 / 256, 1.0 + 3.0 / 256,
                   1.0 + 1.0 / 2048, -2.5, 3e38, 1e30, 1e-40})
    x.push_back(v);
  return x;
}

Vec rounded(Vec v, DType dtype) {
  for (double& e : v) e = ref::round_to(e, dtype);
  return v;
}

// x (in `from`, `from_layout`) -> y in the variant's dtype and layout. The inputs are `from`
// values whatever the variant: a cast has a source and a target.
OpCase cast_case(const std::string& what, const Shape& shape, DType from, Layout from_layout, Layout to_layout,
                 std::function<Vec()> source) {
  OpCase oc;
  oc.name = "cast/" + what;
  oc.op = OpKind::cast;
  oc.layouts = {to_layout};
  oc.tol = kExact;
  oc.needs = [from, from_layout](const Variant& v) { return std::vector<Variant>{{from, from_layout}, v}; };
  oc.prepare = [=](Backend& be, const Variant& v, DType) {
    struct State { Tensor x, y; };
    auto s = std::make_shared<State>();
    s->x = device_tensor(be, rounded(source(), from), shape, from, from_layout);
    s->y = poisoned(be, shape, v.dtype, v.layout);
    return Prepared{[&be, s] { be.ops().cast(s->x, s->y); }, [s] { return Outputs{{"y", read(s->y)}}; }};
  };
  oc.reference = [=](const Variant& v, DType) { return Outputs{{"y", rounded(rounded(source(), from), v.dtype)}}; };
  return oc;
}

std::vector<OpCase> cast_cases() {
  std::vector<OpCase> cases;
  const auto name = dtype_str;
  // Every pair of float dtypes on the probe values (1-D).
  const Shape probe_shape{static_cast<int64_t>(cast_probe_values().size())};
  for (DType from : kFloats)
    cases.push_back(cast_case("probe_values_from_" + name(from), probe_shape, from, Layout::nchw, Layout::nchw,
                              cast_probe_values));
  // nchw <-> nhwc with any dtype pair, and shapes where both orders coincide (C = 1, 1x1).
  for (const Shape& s : {Shape{2, 3, 4, 5}, Shape{3, 1, 6, 7}, Shape{4, 9, 1, 1}, Shape{1, 17, 3, 2}})
    for (DType from : kFloats)
      for (Layout l : {Layout::nchw, Layout::nhwc}) {
        const Layout other = l == Layout::nchw ? Layout::nhwc : Layout::nchw;
        const std::string what = shape_name(s) + "_" + name(from) + (l == Layout::nchw ? "_nchw_to_nhwc" : "_nhwc_to_nchw");
        cases.push_back(cast_case(what, s, from, l, other, [s] { return ref::random_vec(numel(s), 112, -2.0, 2.0); }));
      }
  return cases;
}

// ---- fill -----------------------------------------------------------------------------------

struct FillCase {
  Shape shape;
  float f32, bf16, f16;
  int32_t i32;
  uint8_t u8;
  float value(DType d) const {
    switch (d) {
      case DType::f32: return f32;
      case DType::bf16: return bf16;
      case DType::f16: return f16;
      case DType::i32: return static_cast<float>(i32);
      case DType::u8: return u8;
    }
    return 0;
  }
};

OpCase fill_case(const FillCase& f) {
  OpCase oc;
  oc.name = "fill/" + shape_name(f.shape);
  oc.op = OpKind::fill;
  oc.dtypes = {DType::f32, DType::bf16, DType::f16, DType::i32, DType::u8};
  oc.tol = kExact;
  oc.prepare = [f](Backend& be, const Variant& v, DType) {
    auto y = std::make_shared<Tensor>(poisoned(be, f.shape, v.dtype));
    return Prepared{[&be, y, value = f.value(v.dtype)] { be.ops().fill(*y, value); },
                    [y] { return Outputs{{"y", read(*y)}}; }};
  };
  oc.reference = [f](const Variant& v, DType) {
    const bool floating = v.dtype == DType::f32 || v.dtype == DType::bf16 || v.dtype == DType::f16;
    const double value = f.value(v.dtype);
    return Outputs{{"y", Vec(static_cast<size_t>(numel(f.shape)), floating ? ref::round_to(value, v.dtype) : value)}};
  };
  return oc;
}

}  // namespace

std::vector<OpCase> elementwise_cases() {
  std::vector<OpCase> cases;
  for (const Shape& s : kAddShapes) cases.push_back(add_case(s, false));
  for (const Shape& s : kAddShapes) cases.push_back(add_case(s, true));
  for (const Shape& s : kAddShapes) cases.push_back(add_inplace_case(s));
  for (const auto& parts : kPartLists) cases.push_back(concat_case(parts));
  for (const auto& parts : kPartLists) cases.push_back(split_case(parts));
  for (OpCase& c : cast_cases()) cases.push_back(std::move(c));
  // A large fill (several threads' worth) and a small one.
  for (const FillCase& f : {FillCase{{3, 70000}, 2.5f, 0.1f, 0.1f, -7, 200}, FillCase{{3, 1001}, 3.25f, -1.5f, 0.125f, 7, 200}})
    cases.push_back(fill_case(f));
  return cases;
}

}  // namespace convoy::optest
