#pragma once
// Per-layer times of a benchmark case, for `convoy bench --profile`: where a step's time goes,
// layer by layer, forward and backward, and on a GPU kernel by kernel.
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/backends/backend.h"
#include "engine/graph/model.h"

namespace convoy {

// Runs `step` (one training step or inference pass of `model`) `steps` times with every layer
// timed alone: the device is synchronized before and after each layer, so a layer's time is
// its own work, not the queue's. Then `steps` more, unobserved and back to back, with the backend's
// kernel trace on (Backend::trace_kernels). Returns {"steps", "step_ms" (median synchronized step),
// "layers": [{name, type, forward_ms, backward_ms (null if it never ran)}], "note"}, and either
// "kernels": [{name, calls_per_step, ms_per_step, share}] (the 50 slowest), "kernels_distinct",
// "kernels_ms_per_step" (all kernels) and "kernels_step_ms" (a traced step's wall time), or
// "kernels_note": why there is no trace (the CPU, no CUPTI).
nlohmann::json profile_layers(Backend& backend, Model& model, const std::function<void()>& step, int64_t steps);

// The profile as text: the `top` slowest layers (forward + backward) with their share, the time
// per layer type, then the `top` slowest kernels, or why there are none.
std::string profile_table(const nlohmann::json& profile, size_t top);

}  // namespace convoy
