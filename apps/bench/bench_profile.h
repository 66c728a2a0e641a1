#pragma once
// Per-layer times of a benchmark case, for `convoy bench --profile`: where a step's time goes,
// layer by layer, forward and backward.
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/backends/backend.h"
#include "engine/graph/model.h"

namespace convoy {

// Runs `step` (one training step or inference pass of `model`) `steps` times with every layer
// timed alone: the device is synchronized before and after each layer, so a layer's time is
// its own work, not the queue's. Returns {"steps", "step_ms" (median synchronized step),
// "layers": [{name, type, forward_ms, backward_ms (null if it never ran)}], "note"}.
nlohmann::json profile_layers(Backend& backend, Model& model, const std::function<void()>& step, int64_t steps);

// The profile as text: the `top` slowest layers (forward + backward) with their share, then
// the time per layer type.
std::string profile_table(const nlohmann::json& profile, size_t top);

}  // namespace convoy
