// libFuzzer target: convoy serve's gRPC ModelInfer request as it arrives, bytes that protobuf
// parses into a ModelInferRequest (most mutations do not; those are gRPC's to refuse), then
// turned into the server's request (apps/serve/grpc/grpc_request.h; shared memory: a 4 KiB region
// "r", serve_fuzz_support.h) and its reply's outputs. A
// refused request must be a RequestError of 400 (INVALID_ARGUMENT); anything else is a finding.
#include <cstdio>
#include <cstdlib>

#include <google/protobuf/stubs/logging.h>

#include "apps/serve/grpc/grpc_request.h"
#include "tests/fuzz/serve_fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);  // its line per string that is not UTF-8 would flood the log
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inference::ModelInferRequest q;
  if (!q.ParseFromArray(data, static_cast<int>(size))) return 0;
  const convoy::serve::TensorSpec spec{{1, 4, 4}, 2, 3};  // input (n, 1, 4, 4), n <= 2
  try {
    const convoy::serve::InferRequest r = convoy::serve::grpc_infer_request(q, spec, convoy::fuzz::serve_registry());
    const int64_t n = r.input.defined() ? r.input.dim(0) : static_cast<int64_t>(r.encoded.size());
    if (n < 1 || n > 2 || r.outputs.empty()) std::abort();
    const std::vector<float> values(static_cast<size_t>(n * 3), 0.5f);
    for (const convoy::serve::RequestedOutput& o : r.outputs)
      if (o.classification > 0) (void)convoy::serve::top_k_classes(values, 3, o.classification, {"a", "b", "c"});
  } catch (const convoy::serve::RequestError& e) {
    if (e.status() != 400) std::abort();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: not a RequestError: %s\n", e.what());
    std::abort();
  }
  return 0;
}
