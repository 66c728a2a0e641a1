// libFuzzer target: convoy serve's KServe v2 infer request reader (the streaming JSON reader of
// apps/serve/kserve_request.cpp and Triton's binary tensor extension) and reply writer on arbitrary
// bodies. The first byte chooses: bit 0, an Inference-Header-Content-Length, the next two bytes
// (bit 2: counted back from one past the body's end, so that lengths at and past it are reached);
// bit 1, a budget of 2 KiB instead of the model's default, so that the 413 paths are; bit 3, no
// shared memory served (else a registry with a 4 KiB region "r"). A refused request must be a
// RequestError of 400 or 413; anything else is a finding.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "apps/serve/kserve_json.h"
#include "tests/fuzz/serve_fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data + 3), size - 3);
  const size_t length = (static_cast<size_t>(data[1]) << 8) | data[2];
  std::optional<size_t> header_length;
  if (data[0] & 1) header_length = data[0] & 4 ? body.size() + 1 - length % (body.size() + 2) : length;
  convoy::serve::TensorSpec spec{{1, 4, 4}, 2, 3};  // input (n, 1, 4, 4), n <= 2
  if (data[0] & 2) spec.memory_budget = 2048;
  try {
    const convoy::serve::SharedMemoryRegistry* shm = data[0] & 8 ? nullptr : &convoy::fuzz::serve_registry();
    const convoy::serve::InferRequest r = convoy::serve::parse_infer_request(body, header_length, spec, shm);
    const int64_t n = r.input.defined() ? r.input.dim(0) : static_cast<int64_t>(r.encoded.size());
    if (n < 1 || n > 2 || r.outputs.empty() || r.outputs.size() > 16) std::abort();
    if (r.input.defined() && r.input.numel() != n * 16) std::abort();
    // The reply for it: every output of the request, JSON, binary or in shared memory.
    const std::vector<float> values(static_cast<size_t>(n * 3), 0.5f);
    (void)convoy::serve::make_infer_reply(r, "m", 1, values, values, 3, {"a", "b", "c"});
  } catch (const convoy::serve::RequestError& e) {
    if (e.status() != 400 && e.status() != 413) std::abort();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: not a RequestError: %s\n", e.what());
    std::abort();
  }
  return 0;
}
