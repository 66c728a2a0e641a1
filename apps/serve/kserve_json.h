#pragma once
// The KServe v2 inference request and response bodies, as Triton speaks them over HTTP: JSON
// tensors, and Triton's binary tensor data extension (a JSON header of
// Inference-Header-Content-Length bytes followed by the raw tensors).
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/tensor.h"

namespace convoy::serve {

class SharedMemoryRegistry;  // apps/serve/shared_memory.h
struct SharedMemorySlice;

// A request the server refuses, with the HTTP status that says why (400, 404, 503, ...).
class RequestError : public std::runtime_error {
 public:
  RequestError(unsigned status, const std::string& what) : std::runtime_error(what), status_(status) {}
  unsigned status() const { return status_; }

 private:
  unsigned status_;
};

// The one input and two outputs every served Convoy model has.
inline constexpr const char* kInputName = "input";
inline constexpr const char* kLogitsName = "logits";
inline constexpr const char* kProbabilitiesName = "probabilities";

// What a served model expects: its input (C, H, W) and batch limit, and what reading a request
// may take.
struct TensorSpec {
  Shape input;  // (C, H, W)
  int64_t max_batch_size = 1;
  int64_t classes = 0;
  uint64_t memory_budget = 0;  // bytes; 0: request_memory_budget's default
};

// What a request's JSON may take beside its input's data (ids, names, shape, parameters).
inline constexpr uint64_t kRequestMetadataBytes = uint64_t{1} << 20;

// The bytes parse_infer_request may spend reading one request: the input tensor, data sent before
// its shape, and 16 bytes for each other JSON value plus its strings. spec.memory_budget, or else
// the model's input at max batch as FP32 plus kRequestMetadataBytes.
uint64_t request_memory_budget(const TensorSpec& spec);

// An output to return: as JSON data or binary, and as its tensor, or (classification k > 0) as
// Triton's classification extension gives it: BYTES (n, k), each row's k highest values.
struct RequestedOutput {
  std::string name;
  bool binary = false;
  int64_t classification = 0;
  std::shared_ptr<const SharedMemorySlice> shm;  // set: written there, and the reply has no data
};

struct InferRequest {
  std::string id;
  Tensor input;             // (n, C, H, W) on the CPU, u8 or f32; undefined for encoded images
  // A BYTES input (Triton's convention for image models): one encoded JPEG or PNG per element,
  // decoded and preprocessed by the server with the checkpoint's preprocessing.
  std::vector<std::string> encoded;
  int64_t timeout_us = 0;   // parameters.timeout; 0 = the model's default
  std::vector<RequestedOutput> outputs;  // in order
};

// A request's parameters.timeout, in microseconds (HTTP and gRPC alike): RequestError(400)
// when negative; values above kMaxTimeoutUs (one hour) are cut to it.
int64_t check_timeout(int64_t timeout_us);

// A requested output's "classification" parameter, `k`: RequestError(400) naming it unless
// 1 <= k <= classes (Triton's document sets no bound; its server would cut k to `classes`).
int64_t check_classification(const std::string& output, int64_t k, int64_t classes);

// Triton's classification of each row of `values` (rows, classes): its `k` highest values, highest
// first (the lower index first among equals), each as "value:index:label" (value as std::to_string
// writes a float, as Triton does; ":label" only where `labels` has a non-empty one). rows * k strings.
std::vector<std::string> top_k_classes(const std::vector<float>& values, int64_t classes, int64_t k,
                                       const std::vector<std::string>& labels);

// BYTES elements in Triton's serialization: each a 4-byte little-endian length and its bytes.
std::string serialize_bytes_elements(const std::vector<std::string>& elements);

// The (n, C, H, W) tensor for an input named `name` of `datatype` and `shape`, uninitialized, in
// `allocator`'s memory (a shared-memory slice's: the tensor is those bytes); RequestError(400) when
// the name, datatype or shape is not the model's. For BYTES (shape [n] or [n, 1]) an undefined
// tensor: the images are InferRequest::encoded.
Tensor make_input_tensor(const std::string& name, const std::string& datatype, const Shape& shape,
                         const TensorSpec& spec, const std::shared_ptr<Allocator>& allocator = cpu_allocator());

// The elements of a BYTES tensor in Triton's serialization (each a 4-byte little-endian length and
// that many bytes), exactly n of them filling `data`; RequestError(400) otherwise.
std::vector<std::string> split_bytes_elements(std::string_view data, int64_t n);

// Parses an infer request body, streaming (no DOM): the input's numbers go straight into its
// tensor. `header_length`: the Inference-Header-Content-Length header, when present (the JSON is
// the body's first that many bytes, binary tensors follow). Throws RequestError(400) naming what
// is wrong: malformed JSON, nesting deeper than a request needs, unknown input or output, wrong
// datatype or shape, too few or too many data elements, truncated binary data; RequestError(413)
// as soon as reading it would pass request_memory_budget. Tensors in shared memory (Triton's
// shared_memory_region parameters) are looked up in `shm`; without it they are refused.
InferRequest parse_infer_request(std::string_view body, std::optional<size_t> header_length, const TensorSpec& spec,
                                 const SharedMemoryRegistry* shm = nullptr);

struct InferReplyBody {
  std::string body;
  std::optional<size_t> header_length;  // set when binary outputs follow the JSON
};
// The response: outputs (n, classes) FP32, or BYTES (n, k) classifications labelled with
// `class_names`, as JSON data or binary per request, or written to their shared memory (a
// RequestError(400) when they do not fit there).
InferReplyBody make_infer_reply(const InferRequest& request, const std::string& model, int64_t version,
                                const std::vector<float>& logits, const std::vector<float>& probabilities,
                                int64_t classes, const std::vector<std::string>& class_names);

}  // namespace convoy::serve
