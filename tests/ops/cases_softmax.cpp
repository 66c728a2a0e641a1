// Softmax cross-entropy with label smoothing (loss, dlogits, correct count) and softmax, from
// one sample to 300 and from 3 classes to 1000, with and without smoothing. Logits take the variant's dtype; loss and probs
// are f32 whatever it is.
#include <memory>

#include "tests/ops/op_cases.h"

namespace convoy::optest {
namespace {

struct CeShape {
  int64_t n, c;
  double scale;  // logits uniform in [-scale, scale)
  float smoothing;
  bool half_right;  // every other sample's label logit raised by 2 scale: `correct` is neither 0 nor N
};

const CeShape kShapes[] = {
    // Large logits among them: the log-sum-exp must not overflow.
    {7, 10, 3.0, 0.0f, true},
    {7, 10, 3.0, 0.1f, true},
    {64, 10, 2.0, 0.1f, true},
    {5, 3, 1000.0, 0.0f, true},
    {5, 3, 1000.0, 0.2f, true},
    {1, 100, 5.0, 0.1f, true},
    {16, 10, 4.0, 0.1f, false},  // the CPU's bf16 case
    {8, 10, 4.0, 0.1f, false},
    {1, 37, 4.0, 0.0f, false},
    {64, 1000, 4.0, 0.1f, false},
    {300, 3, 4.0, 0.2f, false},
};

std::string what(const CeShape& k) {
  std::string s = "n" + std::to_string(k.n) + "_c" + std::to_string(k.c) + "_scale" +
                  std::to_string(static_cast<int>(k.scale));
  if (k.smoothing > 0) s += "_smooth" + std::to_string(static_cast<int>(k.smoothing * 10 + 0.5f));
  return s + (k.half_right ? "_half_right" : "");
}

struct CeData {
  Vec logits;
  std::vector<int32_t> labels;
  CeData(const CeShape& k, DType values) : labels(ref::random_ints(k.n, static_cast<int32_t>(k.c), 82)) {
    logits = ref::random_vec(k.n * k.c, 81, -k.scale, k.scale);
    if (k.half_right)
      for (int64_t i = 0; i < k.n; i += 2) logits[i * k.c + labels[i]] += 2 * k.scale;
    for (double& v : logits) v = ref::round_to(v, values);
  }
};

// f32 results of any logits' dtype: the log-sum-exp of exactly rounded logits, in f32.
constexpr Tolerance kF32Result = uniform_tolerance(1e-5);
// dlogits: (softmax - target) / N rounded to the logits' dtype.
constexpr Tolerance kDlogitsTol{1e-5, 1e-2, 2e-3};

OpCase cross_entropy_case(const CeShape& k) {
  OpCase oc;
  oc.name = "softmax_cross_entropy/" + what(k);
  oc.op = OpKind::softmax_cross_entropy;
  oc.tol = kDlogitsTol;
  oc.prepare = [k](Backend& be, const Variant& v, DType values) {
    const CeData d(k, values);
    struct State { Tensor logits, labels, loss, dlogits, correct, loss2, no_dlogits, correct2; };
    auto s = std::make_shared<State>();
    s->logits = device_tensor(be, d.logits, {k.n, k.c}, v.dtype);
    s->labels = be.upload(Tensor::from_ints(d.labels, {k.n}));
    s->loss = poisoned(be, {1}, DType::f32);
    s->dlogits = poisoned(be, {k.n, k.c}, v.dtype);
    s->correct = poisoned(be, {1}, DType::i32);
    s->loss2 = poisoned(be, {1}, DType::f32);
    s->correct2 = poisoned(be, {1}, DType::i32);
    return Prepared{[&be, k, s] {
                      be.ops().softmax_cross_entropy(s->logits, s->labels, k.smoothing, s->loss, s->dlogits, s->correct);
                    },
                    [&be, k, s] {
                      // Evaluation: no gradient wanted, the same loss and count.
                      be.ops().softmax_cross_entropy(s->logits, s->labels, k.smoothing, s->loss2, s->no_dlogits,
                                                     s->correct2);
                      return Outputs{{"loss", read(s->loss), kF32Result},
                                     {"dlogits", read(s->dlogits)},
                                     {"correct", read(s->correct), kExact},
                                     {"loss (without dlogits)", read(s->loss2), kF32Result},
                                     {"correct (without dlogits)", read(s->correct2), kExact}};
                    }};
  };
  oc.reference = [k](const Variant&, DType values) {
    const CeData d(k, values);
    const ref::CrossEntropy r = ref::softmax_cross_entropy(d.logits, k.n, k.c, d.labels, k.smoothing);
    const Vec correct{static_cast<double>(r.correct)};
    return Outputs{{"loss", {r.loss}},
                   {"dlogits", r.dlogits},
                   {"correct", correct},
                   {"loss (without dlogits)", {r.loss}},
                   {"correct (without dlogits)", correct}};
  };
  if (k.half_right)  // the data must exercise the count: some samples right and, given two, some wrong
    oc.invariants = [k](const Outputs& got) -> std::string {
      const double correct = got[2].values.at(0);
      const bool mixed = correct > 0 && (k.n == 1 || correct < static_cast<double>(k.n));
      return mixed ? "" : "the count is 0 or N: the data does not exercise it";
    };
  return oc;
}

OpCase softmax_case(const CeShape& k) {
  OpCase oc;
  oc.name = "softmax/" + what(k);
  oc.op = OpKind::softmax;
  oc.tol = kF32Result;
  oc.prepare = [k](Backend& be, const Variant& v, DType values) {
    struct State { Tensor logits, probs; };
    auto s = std::make_shared<State>();
    s->logits = device_tensor(be, CeData(k, values).logits, {k.n, k.c}, v.dtype);
    s->probs = poisoned(be, {k.n, k.c}, DType::f32);
    return Prepared{[&be, s] { be.ops().softmax(s->logits, s->probs); },
                    [s] { return Outputs{{"probs", read(s->probs)}}; }};
  };
  oc.reference = [k](const Variant&, DType values) {
    return Outputs{{"probs", ref::softmax(CeData(k, values).logits, k.n, k.c)}};
  };
  return oc;
}

}  // namespace

std::vector<OpCase> softmax_cases() {
  std::vector<OpCase> cases;
  for (const CeShape& k : kShapes) cases.push_back(cross_entropy_case(k));
  for (const CeShape& k : kShapes) cases.push_back(softmax_case(k));
  return cases;
}

}  // namespace convoy::optest
