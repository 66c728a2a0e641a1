#pragma once
// Batch-norm statistics and affine parameters far from the identity, for tests of folding and
// fusing batch norms (fresh ones are mean 0, var 1, gamma 1, beta 0, which a wrong fold would
// pass), small enough to keep deep nets finite.
#include <cstdint>
#include <random>
#include <variant>

#include "engine/graph/model.h"

namespace convoy::testing {

inline void randomize_batch_norms(Model& model, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (const Model::GraphNode& n : model.graph_nodes()) {
    if (!std::holds_alternative<BatchNormSpec>(n.layer->spec())) continue;
    const auto ps = n.layer->parameters();
    const auto bs = n.layer->buffers();
    const int64_t c = ps[0]->value.numel();
    for (int64_t i = 0; i < c; ++i) {
      ps[0]->value.data<float>()[i] = 0.5f + u(rng);          // gamma
      ps[1]->value.data<float>()[i] = 0.4f * (u(rng) - 0.5f);  // beta
      bs[0]->value.data<float>()[i] = 0.4f * (u(rng) - 0.5f);  // running mean
      bs[1]->value.data<float>()[i] = 0.5f + 1.5f * u(rng);    // running var
    }
  }
  model.mark_weights_changed();
}

}  // namespace convoy::testing
