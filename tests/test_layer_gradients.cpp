// Finite-difference gradient checks of every registered layer type, and of a small residual
// model end to end, on every backend: built into convoy_tests for the CPU and, with
// CONVOY_TEST_CUDA, into convoy_cuda_tests for CUDA device 0 (f32, deterministic algorithms;
// skipped, with the reason, where no GPU is usable). One table of layer cases, one checker.
//
// Each layer is built from YAML text through make_layer (as Model does), built with per-sample
// shapes, and run in training mode. With a fixed random R of the output's shape, the scalar
// loss L = sum(output * R) has dL/doutput = R, which is what backward receives. Every input
// gradient and every parameter gradient the layer returns is compared with the central
// difference (L(v + h) - L(v - h)) / (2h), element by element (all elements of a tensor up to
// kAllElements, else a seeded sample of kSampled plus the first and the last).
// The checker (steps, tolerances and why) is tests/gradcheck/gradient_check.h.
//
// The model test differentiates the mean cross-entropy, whose gradients are ~1e-2 and whose f32
// loss has ~1e-7 absolute noise; its bound is stated beside it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/backends/backend.h"
#include "engine/config/yaml_map.h"
#include "engine/graph/model.h"
#include "engine/graph/yaml_layer_attrs.h"
#include "engine/layers/layer.h"
#include "engine/layers/registry.h"
#include "tests/gradcheck/gradient_check.h"
#include "tests/ops/test_backends.h"

namespace convoy {
namespace {

using gradcheck::dot;
using gradcheck::kLayerTolerance;
using gradcheck::make_values;
using gradcheck::matches_finite_differences;
using gradcheck::Perturbable;
using gradcheck::Tolerance;
using gradcheck::uniform;
using gradcheck::Values;

// ---- backends -------------------------------------------------------------------------------

#ifdef CONVOY_TEST_CUDA
// Deterministic algorithms: finite differences need the forward to repeat exactly.
std::vector<const optest::TestBackend*> gradient_backends() { return {&optest::cuda_deterministic_backend()}; }
#else
std::vector<const optest::TestBackend*> gradient_backends() { return {&optest::cpu_test_backends().front()}; }
#endif

// ---- one layer ------------------------------------------------------------------------------

// The one place a test layer is built from its attributes (YAML text, as a model file has them).
std::unique_ptr<Layer> make_test_layer(const std::string& type, const std::string& name, const std::string& yaml) {
  const YamlMap attrs(yaml_load_string(yaml.empty() ? "{}" : yaml, "test.yaml"), "test.yaml", name);
  std::unique_ptr<Layer> layer = make_layer(type, name, YamlLayerAttrs(attrs));
  attrs.finish();  // a misspelled attribute in a test is an error, not a silent default
  return layer;
}

// Moves a built layer's parameters and buffers to `be`, as Model::to does in f32 nchw;
// gradients start as NaN, so one that backward forgets to write fails.
void to_backend(Layer& layer, Backend& be) {
  for (Parameter* p : layer.parameters()) {
    p->value = be.upload(p->value);
    p->grad = be.empty(p->value.shape(), DType::f32);
    be.ops().fill(p->grad, NAN);
  }
  for (Buffer* b : layer.buffers()) b->value = be.upload(b->value);
}

// What a check leaves behind for extra assertions.
struct LayerRun {
  Backend* backend = nullptr;
  std::unique_ptr<Layer> layer;
  std::vector<Tensor> inputs;  // on the backend
  Tensor output;               // on the backend, at the unperturbed point
};

struct LayerCase {
  std::string name;            // the test's name
  std::string type;
  std::string yaml;            // the layer's attributes, e.g. "{out_channels: 4, kernel: 3}"
  std::vector<Shape> inputs;   // per-sample shapes
  Values values = Values::smooth;
  int64_t batch = 2;
  uint64_t step_seed = 1234;   // StepInfo seed (dropout)
  std::function<void(LayerRun&)> extra = nullptr;  // assertions beyond the gradients
};

// GoogleTest finds it by argument-dependent lookup where it prints a failing case.
[[maybe_unused]] void PrintTo(const LayerCase& c, std::ostream* os) { *os << c.name; }

LayerRun check_layer(const LayerCase& c, Backend& be) {
  LayerRun run;
  run.backend = &be;
  run.layer = make_test_layer(c.type, "layer", c.yaml);
  Layer& layer = *run.layer;
  std::mt19937_64 rng(42);
  const Shape out_sample = layer.build(c.inputs, rng);

  // Batch-norm's identity initialization would hide a mix-up of gamma and beta.
  if (c.type == "batchnorm2d") {
    const auto params = layer.parameters();
    const std::vector<float> gamma = uniform(params[0]->value.numel(), 3, 0.5, 1.5);
    const std::vector<float> beta = uniform(params[1]->value.numel(), 4, -0.5, 0.5);
    std::copy(gamma.begin(), gamma.end(), params[0]->value.data<float>());
    std::copy(beta.begin(), beta.end(), params[1]->value.data<float>());
  }
  to_backend(layer, be);
  for (size_t i = 0; i < c.inputs.size(); ++i)
    run.inputs.push_back(be.upload(make_values(batched(c.batch, c.inputs[i]), c.values, 100 + i)));

  const StepInfo step{true, c.step_seed};
  run.output = layer.forward(be, run.inputs, step);
  EXPECT_EQ(run.output.shape(), batched(c.batch, out_sample)) << "forward vs build's output shape";
  if (run.output.shape() != batched(c.batch, out_sample)) return run;

  const std::vector<float> r = uniform(run.output.numel(), 777);
  const Tensor dy = be.upload(Tensor::from_floats(r, run.output.shape()));
  const std::unique_ptr<bool[]> needs(new bool[c.inputs.size()]);
  std::fill(needs.get(), needs.get() + c.inputs.size(), true);
  const std::vector<Tensor> dx =
      layer.backward(be, run.inputs, run.output, dy, std::span<const bool>(needs.get(), c.inputs.size()));
  EXPECT_EQ(dx.size(), c.inputs.size());
  if (dx.size() != c.inputs.size()) return run;

  const auto loss = [&] { return dot(layer.forward(be, run.inputs, step), r); };
  for (size_t i = 0; i < dx.size(); ++i) {
    const std::string what = "d/d input " + std::to_string(i);
    EXPECT_TRUE(dx[i].defined()) << what << " is undefined";
    if (!dx[i].defined()) continue;
    EXPECT_EQ(dx[i].shape(), run.inputs[i].shape()) << what;
    if (dx[i].shape() != run.inputs[i].shape()) continue;
    Perturbable x(run.inputs[i]);
    EXPECT_TRUE(matches_finite_differences(what, x, dx[i].to_floats(), loss, kLayerTolerance));
  }
  for (Parameter* p : layer.parameters()) {
    Perturbable w(p->value);
    EXPECT_TRUE(matches_finite_differences("d/d " + p->name, w, p->grad.to_floats(), loss, kLayerTolerance));
  }
  run.output = layer.forward(be, run.inputs, step);
  return run;
}

// ---- the table ------------------------------------------------------------------------------

// avgpool2d with padding: a gradient check cannot tell include-pad from exclude-pad (forward
// and backward could agree on either), so check the semantics directly: each output is the
// mean of the window clipped to the unpadded input (PyTorch's count_include_pad=False).
void avgpool_excludes_padding(LayerRun& run) {
  const std::vector<float> x = run.inputs[0].to_floats(), y = run.output.to_floats();
  const int64_t n = 2, c = 3, h = 7, w = 7, p = 4, q = 4;
  ASSERT_EQ(run.output.shape(), (Shape{n, c, p, q}));
  double worst = 0;
  for (int64_t plane = 0; plane < n * c; ++plane)
    for (int64_t i = 0; i < p; ++i)
      for (int64_t j = 0; j < q; ++j) {
        double sum = 0;
        int count = 0;
        for (int64_t a = i * 2 - 1; a < i * 2 + 2; ++a)
          for (int64_t b = j * 2 - 1; b < j * 2 + 2; ++b)
            if (a >= 0 && a < h && b >= 0 && b < w) sum += x[(plane * h + a) * w + b], ++count;
        worst = std::max(worst, std::fabs(y[(plane * p + i) * q + j] - sum / count));
      }
  EXPECT_LE(worst, 1e-5) << "avgpool2d with padding does not divide by the clipped window size";
}

// The dropout check only means something if the mask is neither empty nor full, and the kept
// elements are scaled by 1 / (1 - p).
void dropout_mask_is_real(LayerRun& run) {
  const std::vector<float> x = run.inputs[0].to_floats(), y = run.output.to_floats();
  int64_t dropped = 0;
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (y[i] == 0.0f) ++dropped;
    else worst = std::max(worst, std::fabs(y[i] - x[i] / 0.7));
  }
  const double fraction = static_cast<double>(dropped) / static_cast<double>(x.size());
  EXPECT_GT(fraction, 0.2) << dropped << " of " << x.size() << " dropped";
  EXPECT_LT(fraction, 0.4) << dropped << " of " << x.size() << " dropped";
  EXPECT_LE(worst, 1e-6) << "kept elements are not scaled by 1 / (1 - p)";
  // Another step seed draws another mask.
  const Tensor other = run.layer->forward(*run.backend, run.inputs, StepInfo{true, 2025});
  EXPECT_NE(other.to_floats(), y) << "the mask does not depend on the step seed";
  // Evaluation is the identity.
  const Tensor eval = run.layer->forward(*run.backend, run.inputs, StepInfo{false, 2024});
  EXPECT_EQ(eval.to_floats(), x);
}

const std::vector<LayerCase>& layer_cases() {
  static const std::vector<LayerCase> cases = {
      // conv2d
      {"Conv2dKernel3Padding1Bias", "conv2d", "{out_channels: 4, kernel: 3, padding: 1}", {{3, 6, 6}}},
      {"Conv2dStride2Padding1NoBiasNonSquare", "conv2d",
       "{out_channels: 5, kernel: 3, stride: 2, padding: 1, bias: false}", {{2, 7, 6}}},
      {"Conv2dDilation2Padding2Groups2Bias", "conv2d", "{out_channels: 6, kernel: 3, padding: 2, dilation: 2, groups: 2}",
       {{4, 7, 7}}},
      {"Conv2dRectangularKernelMixedStrideDepthwiseNoBias", "conv2d",
       "{out_channels: 8, kernel: [3, 2], stride: [2, 1], padding: [1, 0], dilation: [1, 2], groups: 4, bias: false}",
       {{4, 7, 6}}},
      {"Conv2dPointwise1x1Stride2", "conv2d", "{out_channels: 3, kernel: 1, stride: 2}", {{5, 5, 5}}, Values::smooth, 3},
      // batchnorm2d (training mode: batch statistics)
      {"BatchNorm2dTrainingModeBatchStatistics", "batchnorm2d", "", {{3, 4, 5}}, Values::smooth, 3},
      {"BatchNorm2dTrainingModeCustomEpsMomentum", "batchnorm2d", "{eps: 1e-3, momentum: 0.3}", {{2, 3, 3}},
       Values::smooth, 4},
      // activations
      {"Relu", "relu", "", {{3, 5, 5}}, Values::away_from_zero},
      {"LeakyReluDefaultSlope", "leaky_relu", "", {{3, 5, 5}}, Values::away_from_zero},
      {"LeakyReluSlope0_2", "leaky_relu", "{negative_slope: 0.2}", {{3, 5, 5}}, Values::away_from_zero},
      // GELU is smooth: values on both sides of and right at 0 are fine.
      {"Gelu", "gelu", "", {{3, 5, 5}}, Values::smooth},
      {"GeluOnFeatureVectors", "gelu", "", {{7}}, Values::smooth, 3},
      // The mobile networks' activations over -8 ... 8: both saturated sides and the slopes between.
      {"Sigmoid", "sigmoid", "", {{3, 5, 5}}, Values::off_integers},
      {"Silu", "silu", "", {{3, 5, 5}}, Values::off_integers},
      {"Hardsigmoid", "hardsigmoid", "", {{3, 5, 5}}, Values::off_integers},
      {"Hardswish", "hardswish", "", {{3, 5, 5}}, Values::off_integers},
      {"Relu6", "relu6", "", {{3, 5, 5}}, Values::off_integers},
      {"Relu6OnFeatureVectors", "relu6", "", {{9}}, Values::off_integers, 3},
      // pooling
      {"MaxPoolNonOverlapping", "maxpool2d", "{kernel: 2}", {{3, 6, 6}}, Values::distinct},
      // kernel 3 > stride 2: inner elements belong to several windows; padding 1 adds edge windows.
      {"MaxPoolOverlappingWindowsWithPadding", "maxpool2d", "{kernel: 3, stride: 2, padding: 1}", {{3, 7, 7}},
       Values::distinct},
      {"MaxPoolStride1Padding1RectangularKernel", "maxpool2d", "{kernel: [3, 2], stride: 1, padding: [1, 1]}",
       {{2, 5, 6}}, Values::distinct},
      {"AvgPoolOverlappingWithPaddingExcludesPad", "avgpool2d", "{kernel: 3, stride: 2, padding: 1}", {{3, 7, 7}},
       Values::smooth, 2, 1234, avgpool_excludes_padding},
      {"AvgPoolNoPaddingRectangular", "avgpool2d", "{kernel: [2, 3], stride: [2, 1]}", {{2, 6, 5}}},
      {"GlobalAvgPool", "global_avg_pool", "", {{4, 5, 3}}, Values::smooth, 3},
      {"GlobalMaxPool", "global_max_pool", "", {{4, 5, 3}}, Values::distinct, 3},
      // linear and flatten
      {"LinearFeaturesWithBias", "linear", "{out_features: 5}", {{7}}, Values::smooth, 3},
      {"LinearFeaturesWithoutBias", "linear", "{out_features: 4, bias: false}", {{6}}, Values::smooth, 3},
      // (C, 1, 1) per sample, as after global pooling: dx must come back as (N, C, 1, 1).
      {"LinearPooledChannelsInput", "linear", "{out_features: 3}", {{6, 1, 1}}, Values::smooth, 3},
      {"LinearPooledChannelsInputWithoutBias", "linear", "{out_features: 3, bias: false}", {{5, 1, 1}}, Values::smooth, 2},
      {"FlattenChannelsHeightWidth", "flatten", "", {{3, 4, 2}}},
      // dropout: a fixed seed makes the mask deterministic
      {"DropoutP0_3FixedSeedMaskIsDeterministic", "dropout", "{p: 0.3}", {{4, 6, 6}}, Values::away_from_zero, 2, 2024,
       dropout_mask_is_real},
      // softmax over channels: of planes (per pixel) and of feature vectors
      {"SoftmaxOverChannelsOfPlanes", "softmax", "", {{4, 3, 3}}},
      {"SoftmaxOnFeatureVectors", "softmax", "", {{6}}, Values::smooth, 3},
      // upsample: whole factors, a rectangular one, bilinear by a factor and to a size that is no multiple
      {"UpsampleNearestScale2", "upsample", "{scale: 2}", {{2, 3, 4}}},
      {"UpsampleNearestScale3x2", "upsample", "{mode: nearest, scale: [3, 2]}", {{2, 2, 3}}},
      {"UpsampleBilinearScale2", "upsample", "{mode: bilinear, scale: 2}", {{2, 3, 4}}},
      {"UpsampleBilinearSize7x5", "upsample", "{mode: bilinear, size: [7, 5]}", {{2, 3, 4}}},
      // add and concat
      {"AddTwoInputs", "add", "", {{3, 4, 4}, {3, 4, 4}}},
      {"ConcatTwoInputs", "concat", "", {{2, 3, 4}, {3, 3, 4}}},
      {"ConcatThreeInputsOneChannelEach", "concat", "", {{1, 4, 4}, {2, 4, 4}, {1, 4, 4}}, Values::smooth, 3},
      // mul: squeeze-and-excitation's x * s, s per channel as (C, 1, 1) or (C), in either order
      {"MulScalesEachChannel", "mul", "", {{4, 5, 3}, {4, 1, 1}}},
      {"MulFactorFirstAsFeatureVector", "mul", "", {{6}, {6, 3, 4}}, Values::smooth, 3},
  };
  return cases;
}

struct LayerParam {
  const LayerCase* c;
  const optest::TestBackend* b;
};

void PrintTo(const LayerParam& p, std::ostream* os) { *os << p.b->name << " " << p.c->name; }

std::vector<LayerParam> layer_params() {
  std::vector<LayerParam> out;
  for (const optest::TestBackend* b : gradient_backends())
    for (const LayerCase& c : layer_cases()) out.push_back({&c, b});
  return out;
}

class LayerGrad : public ::testing::TestWithParam<LayerParam> {};

TEST_P(LayerGrad, MatchesFiniteDifferences) {
  const optest::TestBackend& b = *GetParam().b;
  if (const std::string why = optest::unavailable_reason(b); !why.empty()) GTEST_SKIP() << b.name << ": " << why;
  LayerRun run = check_layer(*GetParam().c, optest::shared_backend(b));
  if (GetParam().c->extra && !::testing::Test::HasFailure()) GetParam().c->extra(run);
}

INSTANTIATE_TEST_SUITE_P(Layers, LayerGrad, ::testing::ValuesIn(layer_params()),
                         [](const ::testing::TestParamInfo<LayerParam>& info) {
                           return info.param.b->name + "__" + info.param.c->name;
                         });

#ifndef CONVOY_TEST_CUDA

// The registry and the table list the same layer types: a new layer gets a gradient check, and
// a layer whose file the linker dropped (they register themselves) is missed loudly.
TEST(LayerGradRegistry, EveryRegisteredLayerTypeHasAGradientCheckAndBack) {
  std::set<std::string> checked;
  for (const LayerCase& c : layer_cases()) checked.insert(c.type);
  const std::vector<std::string> registered = layer_types();
  for (const std::string& type : registered)
    EXPECT_TRUE(checked.count(type)) << "layer type '" << type << "' has no gradient check in this file";
  for (const std::string& type : checked)
    EXPECT_NE(std::find(registered.begin(), registered.end(), type), registered.end())
        << "layer type '" << type << "' is not registered";
}

// Each layer's spec is of its registered type (whose name type() is), and the attributes a
// model leaves out are the spec's defaults (PyTorch's).
TEST(LayerGradRegistry, EveryLayerReportsTheSpecOfItsType) {
  for (const LayerCase& c : layer_cases()) {
    const auto layer = make_test_layer(c.type, "layer", c.yaml);
    const LayerSpec* defaults = default_spec(c.type);
    ASSERT_NE(defaults, nullptr) << c.type;
    EXPECT_EQ(layer->type(), c.type);
    EXPECT_EQ(layer_type(*defaults), c.type);
    EXPECT_EQ(layer->spec().index(), defaults->index()) << c.type;
  }
  EXPECT_EQ(default_spec("conv3d"), nullptr);
  EXPECT_EQ(std::get<ActivationSpec>(make_test_layer("leaky_relu", "a", "")->spec()).negative_slope, 0.01f);
  const auto bn = std::get<BatchNormSpec>(make_test_layer("batchnorm2d", "bn", "")->spec());
  EXPECT_EQ(bn.eps, 1e-5f);
  EXPECT_EQ(bn.momentum, 0.1f);
  EXPECT_EQ(std::get<DropoutSpec>(make_test_layer("dropout", "d", "")->spec()).p, 0.5f);
}

// ---- the checker itself can fail ------------------------------------------------------------

TEST(LayerGradSelfTest, WrongGradientsAreCaught) {
  auto be = make_cpu_backend({});
  auto layer = make_test_layer("conv2d", "conv", "{out_channels: 3, kernel: 3, padding: 1}");
  std::mt19937_64 rng(1);
  layer->build(std::vector<Shape>{{2, 5, 5}}, rng);
  Parameter* w = layer->parameters()[0];
  w->grad = be->zeros(w->value.shape(), DType::f32);
  layer->parameters()[1]->grad = be->zeros({3}, DType::f32);
  std::vector<Tensor> x{make_values({2, 2, 5, 5}, Values::smooth, 9)};
  const StepInfo step{true, 0};
  const Tensor y = layer->forward(*be, x, step);
  const std::vector<float> r = uniform(y.numel(), 10);
  const bool needs[1] = {true};
  layer->backward(*be, x, y, Tensor::from_floats(r, y.shape()), needs);
  const auto loss = [&] { return dot(layer->forward(*be, x, step), r); };
  const std::vector<float> good = w->grad.to_floats();
  Perturbable values(w->value);
  ASSERT_TRUE(matches_finite_differences("weight", values, good, loss, kLayerTolerance));

  std::vector<float> scaled = good;  // 5% too large everywhere
  for (float& g : scaled) g *= 1.05f;
  EXPECT_FALSE(matches_finite_differences("weight", values, scaled, loss, kLayerTolerance));

  std::vector<float> flipped = good;  // one element of the wrong sign
  const auto big = std::max_element(flipped.begin(), flipped.end(),
                                    [](float a, float b) { return std::fabs(a) < std::fabs(b); });
  ASSERT_GT(std::fabs(*big), 0.05f);
  *big = -*big;
  EXPECT_FALSE(matches_finite_differences("weight", values, flipped, loss, kLayerTolerance));
}

#endif

// ---- a whole model: a DAG with a residual add and a concat ----------------------------------

// `act` is read by four layers (branch, res, side, cat): backward must sum the gradients
// flowing into a tensor read more than once. `stem` reads the image batch, so it gets no
// input gradient request but must still produce its weight gradients.
constexpr const char* kTinyModel = R"(
name: tiny_dag
input: [3, 8, 8]
classes: 4
layers:
  - {name: stem, type: conv2d, out_channels: 4, kernel: 3, padding: 1}
  - {name: bn, type: batchnorm2d}
  - {name: act, type: gelu}
  - {name: branch, type: conv2d, out_channels: 4, kernel: 3, padding: 1, bias: false}
  - {name: res, type: add, inputs: [act, branch]}
  - {name: side, type: conv2d, out_channels: 2, kernel: 1, inputs: [act]}
  - {name: cat, type: concat, inputs: [res, side, act]}
  - {name: pool, type: avgpool2d, kernel: 3, stride: 2, padding: 1}
  - {name: drop, type: dropout, p: 0.3}
  - {name: gap, type: global_avg_pool}
  - {name: fc, type: linear, out_features: 4}
)";

struct BackendParam {
  const optest::TestBackend* b;
};

void PrintTo(const BackendParam& p, std::ostream* os) { *os << p.b->name; }

std::vector<BackendParam> model_params() {
  std::vector<BackendParam> out;
  for (const optest::TestBackend* b : gradient_backends()) out.push_back({b});
  return out;
}

class LayerGradModel : public ::testing::TestWithParam<BackendParam> {};

TEST_P(LayerGradModel, ResidualConcatDagParameterGradients) {
  const optest::TestBackend& b = *GetParam().b;
  if (const std::string why = optest::unavailable_reason(b); !why.empty()) GTEST_SKIP() << b.name << ": " << why;
  Backend& be = optest::shared_backend(b);
  Model model = Model::from_yaml(kTinyModel, "tiny_dag.yaml", 5);
  model.to(be, DType::f32);
  const int64_t n = 3;
  const Tensor x = be.upload(make_values({n, 3, 8, 8}, Values::smooth, 21));
  const Tensor labels = be.upload(Tensor::from_ints({0, 3, 1}, {n}));
  const StepInfo step{true, 31};
  const float smoothing = 0.1f;
  Tensor loss = be.empty({1}, DType::f32), correct = be.empty({1}, DType::i32), none;

  const Tensor logits = model.forward(be, x, step);
  ASSERT_EQ(logits.shape(), (Shape{n, 4}));
  Tensor dlogits = be.empty(logits.shape(), DType::f32);
  be.ops().softmax_cross_entropy(logits, labels, smoothing, loss, dlogits, correct);
  for (auto& [name, p] : model.parameters()) be.ops().fill(p->grad, NAN);
  model.backward(be, dlogits);

  const auto loss_fn = [&] {
    const Tensor l = model.forward(be, x, step);
    be.ops().softmax_cross_entropy(l, labels, smoothing, loss, none, correct);
    return static_cast<double>(loss.to_floats()[0]);
  };
  // The loss is a mean over the batch (~1.5) and comes back in f32, whose spacing there is
  // 2.4e-7: with h = 1e-2 the quotient carries up to ~2.4e-5 of quantization noise (the worst
  // seen is ~2e-5), while the gradients are ~1e-3 to 1e-1. Bound: |a - n| <= 1e-2 |n| + 2e-4,
  // i.e. ~8x the worst-case noise plus 1% of the value. Truncation through BN, GELU and softmax
  // at h = 1e-2 is ~1e-6.
  const Tolerance tol{1e-2, 0.0, 2e-4};
  int checked = 0;
  for (auto& [name, p] : model.parameters()) {
    Perturbable w(p->value);
    EXPECT_TRUE(matches_finite_differences(name, w, p->grad.to_floats(), loss_fn, tol, 1e-2));
    ++checked;
  }
  EXPECT_EQ(checked, 9);  // stem w+b, bn w+b, branch w, side w+b, fc w+b
}

INSTANTIATE_TEST_SUITE_P(Backends, LayerGradModel, ::testing::ValuesIn(model_params()),
                         [](const ::testing::TestParamInfo<BackendParam>& info) { return info.param.b->name; });

}  // namespace
}  // namespace convoy
