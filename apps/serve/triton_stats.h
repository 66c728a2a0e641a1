#pragma once
// Triton's statistics extension, written once for both protocols: GET /v2/models[/<m>[/versions/<v>]]/stats
// returns this text, and gRPC's ModelStatistics parses it into ModelStatisticsResponse, so the two
// cannot disagree. The numbers are the metrics' (metrics.h), which /metrics also reports.
#include <cstdint>
#include <string>

#include "apps/serve/metrics.h"
#include "apps/serve/repository.h"

namespace convoy::serve {

// $stats_model_response as JSON: {"model_stats": [...]}, one entry per ready version; 64-bit
// counts as JSON numbers, durations in ns. `model` empty: every model; `version` 0: every ready
// version of `model`. RequestError(404) naming it when the model or version is not ready.
std::string model_statistics_json(const ModelRepository& repository, MetricsRegistry& metrics, const std::string& model,
                                  int64_t version);

}  // namespace convoy::serve
