#pragma once
// A served model's REPO/<model>/config.yaml: batching, instances, device, memory budget and
// which versions to serve, in Triton's terms. Validated like every Convoy YAML.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/precision.h"

namespace convoy::serve {

// The longest request timeout honoured, in microseconds: one hour. A request's
// parameters.timeout or a model's default_timeout_microseconds above it is cut to it, so that
// no value (up to 2^63 - 1) overflows when added to the clock.
inline constexpr int64_t kMaxTimeoutUs = int64_t{3600} * 1000 * 1000;

// Which of the version folders REPO/<model>/<N>/ are served (Triton's version_policy).
struct VersionPolicy {
  enum class Kind { latest, all, specific };
  Kind kind = Kind::latest;
  int64_t latest = 1;              // Kind::latest: the N highest versions
  std::vector<int64_t> specific;   // Kind::specific: exactly these
};

struct ModelConfig {
  std::string name;                 // the folder's name
  int64_t max_batch_size = 8;       // images per forward pass (and per request)
  bool dynamic_batching = false;    // requests are merged into batches when present
  int64_t max_queue_delay_us = 0;   // how long the first request of a batch may wait for more
  std::vector<int64_t> preferred_batch_size;  // a batch this size runs at once
  int64_t max_queue_size = 64;      // queued requests beyond it are refused with 503 at once
  int64_t default_timeout_us = 0;   // a request queued longer fails; 0 = no limit
  int64_t instance_count = 1;       // execution instances (each its own copy of the model)
  std::string device = "auto";      // auto | cpu | cuda | cuda:N
  int64_t threads = 0;              // CPU threads per instance, 0 = all cores
  // What inference computes in (kInferencePrecisions), as `convoy infer --precision`;
  // nullopt is `auto`: on a GPU the checkpoint's 8-bit type where it was quantized for a GPU, else
  // its training precision (bf16, tf32) where it runs there, else fp32; on the CPU int8 for a
  // `convoy quantize` checkpoint, else fp32.
  std::optional<Precision> precision;
  uint64_t max_memory = 0;          // bytes for all served versions together; 0 = no budget
  VersionPolicy version_policy;
};

// Reads and validates `path` (REPO/<model>/config.yaml) for the model folder `name`; an absent
// file gives the defaults. Unknown keys and bad values are InputErrors naming file:line: key.
ModelConfig read_model_config(const std::string& path, const std::string& name);

// "2GiB", "512MiB", "1.5GB", "4096" (bytes) -> bytes; std::nullopt-like: throws InputError via `fail`.
// Returns -1 when the text is not a size.
int64_t parse_memory_size(const std::string& text);

// Which of the `available` versions (sorted ascending) the policy serves, ascending.
std::vector<int64_t> select_versions(const VersionPolicy& policy, const std::vector<int64_t>& available);

}  // namespace convoy::serve
