#pragma once
// A served version's configuration in Triton's schema: the ModelConfig message of Triton's
// model_config.proto (the subset in apps/serve/grpc/model_config.proto), written once, as
// Triton's HTTP endpoint writes it, for both protocols: GET /v2/models/<m>/config returns this
// text, and gRPC's ModelConfig parses it into the message, so the two cannot disagree.
#include <string>

#include "apps/serve/served_model.h"

namespace convoy::serve {

// The JSON mapping Triton's GET .../config returns: protobuf's, with the proto field names
// (snake_case), enums by name ("TYPE_FP32", "KIND_GPU"), 64-bit integers as JSON numbers, the
// primitive fields of the subset printed even when zero. What Triton has no field for is in
// `parameters` (ModelParameter string_value): class_names (a JSON array), preprocessing (a JSON
// object), input_datatypes, device, precision, execution, max_memory, estimated_memory.
std::string triton_model_config_json(const ServedVersion& served);

}  // namespace convoy::serve
