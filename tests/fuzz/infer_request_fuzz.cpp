// libFuzzer target: convoy serve's KServe v2 infer request parser (JSON tensors and Triton's
// binary tensor extension) on arbitrary bodies. The first byte says whether the body has an
// Inference-Header-Content-Length and the next two give it, so binary bodies are reached too.
// A refused request must be a RequestError (a 4xx); anything else is a finding.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "apps/serve/kserve_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  std::optional<size_t> header_length;
  if (data[0] & 1) header_length = (static_cast<size_t>(data[1]) << 8) | data[2];
  const std::string_view body(reinterpret_cast<const char*>(data + 3), size - 3);
  const convoy::serve::TensorSpec spec{{1, 4, 4}, 2, 3};  // input (n, 1, 4, 4), n <= 2
  try {
    const convoy::serve::InferRequest r = convoy::serve::parse_infer_request(body, header_length, spec);
    if (r.input.dim(0) < 1 || r.input.dim(0) > 2 || r.outputs.empty()) std::abort();
    // The reply for it: every output of the request, JSON or binary.
    const std::vector<float> values(static_cast<size_t>(r.input.dim(0) * 3), 0.5f);
    (void)convoy::serve::make_infer_reply(r, "m", 1, values, values, 3, {"a", "b", "c"});
  } catch (const convoy::serve::RequestError& e) {
    if (e.status() < 400 || e.status() >= 500) std::abort();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: not a RequestError: %s\n", e.what());
    std::abort();
  }
  return 0;
}
