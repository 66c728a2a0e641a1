// One op test harness: every case of tests/ops/cases_*.cpp on every backend of this binary,
// one test per (backend, case), named <backend>__<op>__<what>.
//
// Built twice: into convoy_tests for the CPU backend, and with CONVOY_TEST_CUDA into
// convoy_cuda_tests for CUDA device 0 (every op, and the conv and batch-norm ops again in the
// configurations that take other code paths; skipped, with the reason, where no GPU is usable).
//
// For each variant (dtype x layout) of a case the backend supports(), the results must match
// the float64 reference within the case's bound for that dtype; a GPU result must also match
// the CPU's on the same input values (in the same variant where the CPU runs it, else in f32
// nchw). A variant the backend does not support is reported and must be refused: running it
// must throw convoy::Error, so supports() is checked in both directions.
#include <gtest/gtest.h>

#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "tests/ops/op_cases.h"
#include "tests/ops/test_backends.h"

namespace convoy::optest {
namespace {

#ifdef CONVOY_TEST_CUDA
const std::vector<TestBackend>& backends_under_test() { return cuda_test_backends(); }
#else
const std::vector<TestBackend>& backends_under_test() { return cpu_test_backends(); }
#endif

struct Param {
  const OpCase* c;
  const TestBackend* b;
};

void PrintTo(const Param& p, std::ostream* os) { *os << p.b->name << " " << p.c->name; }

std::vector<Param> params() {
  std::vector<Param> out;
  for (const TestBackend& b : backends_under_test())
    for (const OpCase& c : all_cases())
      if (b.runs(c.op)) out.push_back({&c, &b});
  return out;
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  std::string name = info.param.b->name + "__" + info.param.c->name;
  const size_t slash = name.find('/');
  return name.replace(slash, 1, "__");
}

// Runs `c` in `v` on `be` with inputs rounded to `values`: the results after one run().
Outputs run_case(const OpCase& c, Backend& be, const Variant& v, DType values) {
  Prepared p = c.prepare(be, v, values);
  p.run();
  be.synchronize();
  return p.outputs();
}

double bound(const OpCase& c, const Output& o, DType dtype, Device device) {
  return (o.tol ? *o.tol : c.tol).of(dtype, device);
}

// The names must agree before values are compared.
::testing::AssertionResult same_names(const Outputs& got, const Outputs& want) {
  std::string g, w;
  for (const Output& o : got) g += "'" + o.name + "' ";
  for (const Output& o : want) w += "'" + o.name + "' ";
  if (g == w) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "results " << g << "but the reference has " << w;
}

void expect_reference(const OpCase& c, const Variant& v, Device device, const Outputs& got, const Outputs& want) {
  ASSERT_TRUE(same_names(got, want));
  for (size_t i = 0; i < got.size(); ++i) {
    const std::string diff = compare(got[i].values, want[i].values, bound(c, got[i], v.dtype, device));
    EXPECT_TRUE(diff.empty()) << got[i].name << " vs the float64 reference: " << diff;
  }
  if (c.invariants) {
    const std::string wrong = c.invariants(got);
    EXPECT_TRUE(wrong.empty()) << wrong;
  }
}

// The CPU variant a GPU run of `v` is compared with: v itself where the CPU runs it, else v's
// dtype in nchw, else f32 (in v's layout, else nchw), else any variant of the case it runs.
std::optional<Variant> cpu_counterpart(const OpCase& c, const Variant& v, const Ops& cpu) {
  std::vector<Variant> candidates{v, {v.dtype, Layout::nchw}, {DType::f32, v.layout}, {DType::f32, Layout::nchw}};
  for (const Variant& other : c.variants()) candidates.push_back(other);
  for (const Variant& cand : candidates)
    if (c.supported_by(cpu, cand)) return cand;
  return std::nullopt;
}

void expect_cpu(const OpCase& c, const Variant& v, Device device, const Outputs& got, const Variant& cv,
                const Outputs& cpu) {
  ASSERT_TRUE(same_names(got, cpu));
  for (size_t i = 0; i < got.size(); ++i) {
    double b = 0;
    if (!(got[i].same_bits && cv.dtype == v.dtype))  // results are compared in nchw order
      b = c.vs_cpu ? c.vs_cpu->of(v.dtype, device)
                   : bound(c, got[i], v.dtype, device) + bound(c, cpu[i], cv.dtype, Device::cpu());
    const std::string diff = compare(got[i].values, cpu[i].values, b);
    EXPECT_TRUE(diff.empty()) << got[i].name << " vs the CPU's in " << variant_str(cv) << ": " << diff;
  }
}

class OpTest : public ::testing::TestWithParam<Param> {};

TEST_P(OpTest, MatchesReference) {
  const OpCase& c = *GetParam().c;
  const TestBackend& tb = *GetParam().b;
  if (const std::string why = unavailable_reason(tb); !why.empty()) GTEST_SKIP() << tb.name << ": " << why;
  Backend& be = shared_backend(tb);
  const bool vs_cpu = !be.device().is_cpu();

  std::vector<std::string> ran, refused;
  for (const Variant& v : c.variants()) {
    SCOPED_TRACE(tb.name + ", " + c.name + ", " + variant_str(v));
    if (!c.supported_by(be.ops(), v)) {
      // Not supported: reported, and the op must refuse it rather than compute something.
      try {
        run_case(c, be, v, v.dtype);
        ADD_FAILURE() << "supports() says " << tb.name << " does not run " << variant_str(v)
                      << ", yet it ran without an error: supports() is out of date";
      } catch (const Error&) {
      }
      refused.push_back(variant_str(v));
      continue;
    }
    ran.push_back(variant_str(v));
    const Outputs got = run_case(c, be, v, v.dtype);
    expect_reference(c, v, be.device(), got, c.reference(v, v.dtype));
    if (vs_cpu) {
      Backend& cpu = shared_cpu_backend();
      const std::optional<Variant> cv = cpu_counterpart(c, v, cpu.ops());
      if (!cv) {
        ADD_FAILURE() << "the CPU runs no variant of this case to compare with";
        continue;
      }
      const Outputs cpu_got = run_case(c, cpu, *cv, v.dtype);
      expect_reference(c, *cv, Device::cpu(), cpu_got, c.reference(*cv, v.dtype));
      expect_cpu(c, v, be.device(), got, *cv, cpu_got);
    }
  }
  std::string refused_list;
  for (const std::string& r : refused) refused_list += (refused_list.empty() ? "" : ", ") + r;
  if (!refused.empty()) {
    RecordProperty("refused", refused_list);
    std::cout << "[ REFUSED  ] " << tb.name << " does not support " << c.name << " in " << refused_list
              << " (supports() says no; each throws)\n";
  }
  if (ran.empty()) GTEST_SKIP() << tb.name << " supports none of this case's variants (" << refused_list << ")";
}

INSTANTIATE_TEST_SUITE_P(Ops, OpTest, ::testing::ValuesIn(params()), param_name);

#ifndef CONVOY_TEST_CUDA

// Every op of the set has cases. Prints the table of cases and variants per op.
TEST(OpCoverage, EveryOpHasCases) {
  const Ops& cpu = shared_cpu_backend().ops();
  std::map<OpKind, int> cases, variants, cpu_variants;
  for (const OpCase& c : all_cases()) {
    ++cases[c.op];
    for (const Variant& v : c.variants()) {
      ++variants[c.op];
      cpu_variants[c.op] += c.supported_by(cpu, v);
    }
  }
  std::ostringstream table;
  table << std::left << std::setw(26) << "op" << std::right << std::setw(7) << "cases" << std::setw(10)
        << "variants" << std::setw(8) << "on cpu" << "\n";
  int total_cases = 0;
  for (OpKind op : kAllOps) {
    EXPECT_GT(cases[op], 0) << op_name(op) << " has no op test case (tests/ops/cases_*.cpp)";
    table << std::left << std::setw(26) << op_name(op) << std::right << std::setw(7) << cases[op] << std::setw(10)
          << variants[op] << std::setw(8) << cpu_variants[op] << "\n";
    total_cases += cases[op];
  }
  EXPECT_EQ(total_cases, static_cast<int>(all_cases().size())) << "a case names an op outside kAllOps";
  std::cout << table.str() << total_cases << " cases\n";
}

// The CPU runs every case in at least one variant, so every case's op is checked against the
// reference on every machine, and every GPU result has a CPU result to be compared with.
TEST(OpCoverage, TheCpuRunsEveryCase) {
  const Ops& cpu = shared_cpu_backend().ops();
  for (const OpCase& c : all_cases()) {
    bool runs = false;
    for (const Variant& v : c.variants()) runs = runs || c.supported_by(cpu, v);
    EXPECT_TRUE(runs) << c.name << ": the CPU runs none of its variants";
  }
}

#endif

}  // namespace
}  // namespace convoy::optest
