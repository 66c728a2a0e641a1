#pragma once
// What the CPU inference plan's tests check against: a float64 forward of a model built from the
// reference ops through the model's DAG, random inputs, the logits' scaled error, and how often a
// step occurs in a plan's describe() text.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <variant>
#include <vector>

#include "engine/graph/model.h"
#include "engine/layers/layer_spec.h"
#include "engine/layers/registry.h"
#include "tests/reference/reference_ops.h"

namespace convoy::testing {

inline Tensor random_input(const Model& model, int64_t batch, uint64_t seed) {
  const Shape& in = model.input_shape();
  const Shape shape{batch, in[0], in[1], in[2]};
  return ref::to_tensor(ref::random_vec(shape_numel(shape), seed), shape);
}

// max |a - b| / max(1, max |b|): fp32 error relative to the logits' scale.
inline double scaled_error(const Tensor& a, const Tensor& b) {
  const ref::Vec x = ref::to_vec(a), y = ref::to_vec(b);
  EXPECT_EQ(x.size(), y.size());
  double err = 0, scale = 1;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    err = std::max(err, std::abs(x[i] - y[i]));
    scale = std::max(scale, std::abs(y[i]));
  }
  return err / scale;
}

// Model::forward in float64 from the reference ops, through the same DAG.
inline ref::Vec reference_forward(Model& model, const Tensor& x) {
  const auto nodes = model.graph_nodes();
  const int64_t n = x.dim(0);
  std::vector<ref::Vec> out(nodes.size());
  std::vector<Shape> shape(nodes.size());
  const ref::Vec input = ref::to_vec(x);
  for (size_t i = 0; i < nodes.size(); ++i) {
    Layer& l = *nodes[i].layer;
    auto in = [&](size_t k) -> const ref::Vec& { return nodes[i].inputs[k] < 0 ? input : out[nodes[i].inputs[k]]; };
    auto in_shape = [&](size_t k) {
      return nodes[i].inputs[k] < 0 ? x.shape() : shape[nodes[i].inputs[k]];
    };
    shape[i] = batched(n, nodes[i].shape);
    const auto ps = l.parameters();
    auto bias = [&] { return ps.size() > 1 ? ref::to_vec(ps[1]->value) : ref::Vec(); };
    out[i] = std::visit(
        Overloaded{
            [&](const Conv2dSpec& s) {
              const ref::Vec b = bias();
              return ref::conv2d_forward(s.params, in(0), in_shape(0), ref::to_vec(ps[0]->value),
                                         ps[0]->value.shape(), ps.size() > 1 ? &b : nullptr);
            },
            [&](const BatchNormSpec& s) {
              const auto bs = l.buffers();
              return ref::batchnorm_forward_eval(in(0), in_shape(0), ref::to_vec(ps[0]->value),
                                                 ref::to_vec(ps[1]->value), ref::to_vec(bs[0]->value),
                                                 ref::to_vec(bs[1]->value), s.eps);
            },
            [&](const ActivationSpec& s) { return ref::activation_forward(s.kind, s.alpha(), in(0)); },
            [&](const Pool2dSpec& s) { return ref::pool2d_forward(s.params, in(0), in_shape(0)); },
            [&](const GlobalPoolSpec& s) {
              const Shape xs = in_shape(0);
              return ref::pool2d_forward(s.window(xs[2], xs[3]), in(0), xs);
            },
            [&](const LinearSpec&) {
              const ref::Vec b = bias();
              const Shape xs{n, shape_numel(in_shape(0)) / n};
              return ref::linear_forward(in(0), xs, ref::to_vec(ps[0]->value), ps[0]->value.shape(),
                                         ps.size() > 1 ? &b : nullptr);
            },
            [&](const AddSpec&) { return ref::add(in(0), in(1)); },
            [&](const FlattenSpec&) { return in(0); },
            [&](const DropoutSpec&) { return in(0); },
            [&](const ConcatSpec&) {
              ADD_FAILURE() << "no reference for layer type concat";
              return ref::Vec();
            },
            [&](const SoftmaxSpec&) { return ref::channel_softmax(in(0), in_shape(0)); },
            [&](const UpsampleSpec& s) {
              const Shape xs = in_shape(0);
              return ref::upsample_forward(s.mode, in(0), xs, s.out_h(xs[2]), s.out_w(xs[3]));
            },
            [&](const MulSpec&) {
              auto sample_shape = [&](size_t k) {  // scale_input reads per-sample shapes
                const Shape s = in_shape(k);
                return Shape(s.begin() + 1, s.end());
              };
              const int k = MulSpec::scale_input(sample_shape(0), sample_shape(1));
              return ref::channel_scale_forward(in(1 - k), in_shape(1 - k), in(k));
            }},
        l.spec());
  }
  return out[model.output_node()];
}

// How often `needle` occurs in a plan's describe() text.
inline size_t occurrences(const std::string& steps, const std::string& needle) {
  size_t n = 0;
  for (size_t p = 0; (p = steps.find(needle, p)) != std::string::npos; ++p) ++n;
  return n;
}

}  // namespace convoy::testing
