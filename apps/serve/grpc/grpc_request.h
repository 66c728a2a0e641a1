#pragma once
// gRPC's ModelInferRequest as the server's InferRequest: the part of ModelInfer between the
// model's lookup and the call, on its own so that it can be fuzzed (tests/fuzz/grpc_infer_fuzz.cpp).
#include <memory>
#include <string>

#include "apps/serve/kserve_json.h"
#include "apps/serve/shared_memory.h"
#include "kserve_v2.pb.h"

namespace convoy::serve {

// The input tensor (or encoded images), timeout and outputs (always raw: binary) of `q` for a
// model of `spec`, tensors in shared memory looked up in `shm`; RequestError(400) naming what is
// wrong, as HTTP's parse_infer_request does.
InferRequest grpc_infer_request(const inference::ModelInferRequest& q, const TensorSpec& spec,
                                const SharedMemoryRegistry& shm);

// The slice a tensor's `parameters` name (shared_memory_region as string_param, shared_memory_offset
// and shared_memory_byte_size as int64_param), or null; RequestError(400) naming `what` when they
// are of the wrong type, incomplete, or name no registered bytes.
std::shared_ptr<const SharedMemorySlice> shared_memory_slice(
    const SharedMemoryRegistry& shm, const google::protobuf::Map<std::string, inference::InferParameter>& parameters,
    const std::string& what);

}  // namespace convoy::serve
