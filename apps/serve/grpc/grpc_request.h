#pragma once
// gRPC's ModelInferRequest as the server's InferRequest: the part of ModelInfer between the
// model's lookup and the call, on its own so that it can be fuzzed (tests/fuzz/grpc_infer_fuzz.cpp).
#include "apps/serve/kserve_json.h"
#include "kserve_v2.pb.h"

namespace convoy::serve {

// The input tensor (or encoded images), timeout and outputs (always raw: binary) of `q` for a
// model of `spec`; RequestError(400) naming what is wrong, as HTTP's parse_infer_request does.
InferRequest grpc_infer_request(const inference::ModelInferRequest& q, const TensorSpec& spec);

}  // namespace convoy::serve
