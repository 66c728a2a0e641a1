#include "tests/ops/op_cases.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>

namespace convoy::optest {

std::string dtype_str(DType dtype) {
  std::string s(dtype_name(dtype));
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string variant_str(const Variant& v) { return dtype_str(v.dtype) + (v.layout == Layout::nhwc ? " nhwc" : " nchw"); }

double Tolerance::of(DType dtype, Device device) const {
  switch (dtype) {
    case DType::f32: return device.is_cuda() && f32_cuda >= 0 ? f32_cuda : f32;
    case DType::bf16: return bf16;
    case DType::f16: return f16;
    case DType::i32:
    case DType::u8: return 0;  // integers are exact
  }
  return 0;
}

std::vector<Variant> OpCase::variants() const {
  std::vector<Variant> out;
  for (DType d : dtypes)
    for (Layout l : layouts) out.push_back({d, l});
  return out;
}

std::vector<Variant> OpCase::requirements(const Variant& v) const {
  return needs ? needs(v) : std::vector<Variant>{v};
}

bool OpCase::supported_by(const Ops& ops, const Variant& v) const {
  for (const Variant& r : requirements(v))
    if (!ops.supports(op, r.dtype, r.layout)) return false;
  return true;
}

const std::vector<OpCase>& all_cases() {
  static const std::vector<OpCase> cases = [] {
    std::vector<OpCase> all;
    // One line per family: a family not named here is not tested.
    for (auto* family : {conv_cases, batchnorm_cases, activation_cases, pool_cases, linear_cases,
                         elementwise_cases, dropout_cases, softmax_cases, optimizer_cases,
                         normalize_augment_cases, channel_scale_cases, resample_cases}) {
      for (OpCase& c : family()) all.push_back(std::move(c));
    }
    std::set<std::string> names;
    for (const OpCase& c : all) {
      const bool well_formed =
          std::count(c.name.begin(), c.name.end(), '/') == 1 && c.name.rfind(op_name(c.op), 0) == 0 &&
          std::all_of(c.name.begin(), c.name.end(),
                      [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '/'; });
      if (!well_formed || !names.insert(c.name).second || !c.prepare || !c.reference || c.dtypes.empty() ||
          c.layouts.empty())
        throw std::logic_error("op case '" + c.name + "' is malformed or not unique");
    }
    return all;
  }();
  return cases;
}

std::string compare(const Vec& got, const Vec& want, double bound) {
  std::ostringstream os;
  os << std::setprecision(9);
  if (got.size() != want.size()) {
    os << got.size() << " values, expected " << want.size();
    return os.str();
  }
  if (bound == 0) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (!(got[i] == want[i]) && !(std::isnan(got[i]) && std::isnan(want[i])) && bad++ == 0) first = i;
    if (bad == 0) return "";
    os << bad << " of " << got.size() << " values differ (bit equality expected); first at " << first
       << ": got " << got[first] << ", want " << want[first];
    return os.str();
  }
  const double err = ref::max_relative_error(got, want);
  if (err <= bound) return "";
  size_t worst = 0;
  double worst_diff = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::isfinite(got[i]) ? std::fabs(got[i] - want[i]) : std::numeric_limits<double>::infinity();
    if (d > worst_diff) worst_diff = d, worst = i;
  }
  os << "relative error " << err << " > " << bound << "; worst at " << worst << ": got " << got[worst]
     << ", want " << want[worst] << " (max |want| " << ref::max_abs(want) << ")";
  return os.str();
}

// ---- building blocks ------------------------------------------------------------------------

int64_t numel(const Shape& shape) { return shape_numel(shape); }

std::string shape_name(const Shape& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

Vec random_values(const Shape& shape, uint64_t seed, DType values, double lo, double hi) {
  Vec v = ref::random_vec(numel(shape), seed, lo, hi);
  for (double& x : v) x = ref::round_to(x, values);
  return v;
}

Vec distinct_planes(const Shape& shape, uint64_t seed) {
  if (shape.size() != 4 || shape[2] * shape[3] > 256)
    throw std::logic_error("distinct_planes: a 4-D shape with planes of at most 256 elements");
  const int64_t plane = shape[2] * shape[3];
  std::mt19937_64 rng(seed);
  Vec v;
  std::vector<int64_t> idx(static_cast<size_t>(plane));
  for (int64_t p = 0; p < shape[0] * shape[1]; ++p) {
    std::iota(idx.begin(), idx.end(), 0);
    std::shuffle(idx.begin(), idx.end(), rng);
    for (int64_t i : idx) v.push_back(static_cast<double>(i - plane / 2) / 16.0);
  }
  return v;
}

Layout layout_for(const Shape& shape, Layout layout) { return shape.size() == 4 ? layout : Layout::nchw; }

namespace {

// Flat nchw <-> flat nhwc of a 4-D logical (N, C, H, W) shape.
Vec permute(const Vec& v, const Shape& s, bool to_nhwc) {
  const int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  Vec out(v.size());
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = 0; b < c; ++b)
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < w; ++j) {
          const int64_t nchw = ((a * c + b) * h + i) * w + j;
          const int64_t nhwc = ((a * h + i) * w + j) * c + b;
          if (to_nhwc) out[nhwc] = v[nchw];
          else out[nchw] = v[nhwc];
        }
  return out;
}

}  // namespace

Tensor device_tensor(Backend& backend, const Vec& values, const Shape& shape, DType dtype, Layout layout) {
  const bool nhwc = layout_for(shape, layout) == Layout::nhwc;
  Tensor host = ref::to_tensor(nhwc ? permute(values, shape, true) : values, shape, dtype);
  if (nhwc) host = host.with_layout(Layout::nhwc);
  return backend.upload(host);
}

Tensor poisoned(Backend& backend, const Shape& shape, DType dtype, Layout layout) {
  Tensor host = Tensor::empty(shape, dtype);
  if (host.nbytes() > 0) std::memset(host.raw(), 0xFF, host.nbytes());
  if (layout_for(shape, layout) == Layout::nhwc) host = host.with_layout(Layout::nhwc);
  return backend.upload(host);
}

Vec read(const Tensor& t) {
  const Vec v = ref::to_vec(t);
  return t.layout() == Layout::nhwc && t.ndim() == 4 ? permute(v, t.shape(), false) : v;
}

}  // namespace convoy::optest
