#include "apps/serve/kserve_json.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "apps/serve/model_config.h"
#include "apps/serve/shared_memory.h"

namespace convoy::serve {

using json = nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& what) { throw RequestError(400, what); }

// Flattens JSON data (a flat or nested row-major array of numbers) into `out`, at most `limit`
// values; nesting deeper than the tensor's rank is an error.
template <class T>
void flatten(const json& data, std::vector<T>& out, size_t limit, int depth, bool is_u8) {
  if (depth > 8) bad("input 'input': data nested deeper than its shape");
  for (const json& v : data) {
    if (v.is_array()) {
      flatten(v, out, limit, depth + 1, is_u8);
      continue;
    }
    if (!v.is_number()) bad("input 'input': data holds a " + std::string(v.type_name()) + ", expected numbers");
    if (out.size() >= limit) bad("input 'input': more data elements than its shape holds (" + std::to_string(limit) + ")");
    const double x = v.get<double>();
    if (is_u8) {
      if (!v.is_number_integer() || x < 0 || x > 255) bad("input 'input': UINT8 data must be integers 0 to 255");
    } else if (!(std::fabs(x) <= std::numeric_limits<float>::max())) {  // as a float: 1e39 would be inf (and nan fails too)
      bad("input 'input': FP32 data must be finite (" + v.dump() + " is not a finite float)");
    }
    out.push_back(static_cast<T>(x));
  }
}

const json* find_member(const json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

void check_finite(const Tensor& input) {
  const float* f = input.data<float>();
  for (int64_t i = 0; i < input.numel(); ++i)
    if (!std::isfinite(f[i])) bad("input 'input': FP32 data must be finite");
}

// The slice of shared memory a tensor's `params` name (Triton's shared-memory extensions), if they
// name one, looked up in `shm`.
std::shared_ptr<const SharedMemorySlice> shared_memory_slice(const json* params, const std::string& what,
                                                             const SharedMemoryRegistry* shm) {
  if (!params || !params->is_object()) return nullptr;
  SharedMemoryParams p;
  if (const json* r = find_member(*params, "shared_memory_region")) {
    if (!r->is_string()) bad(what + ": parameters.shared_memory_region must be a string");
    p.region = r->get<std::string>();
  }
  for (auto [key, field] : {std::pair{"shared_memory_byte_size", &p.byte_size}, {"shared_memory_offset", &p.offset}})
    if (const json* v = find_member(*params, key)) {
      if (!v->is_number_integer()) bad(what + ": parameters." + key + " must be an integer");
      constexpr int64_t most = std::numeric_limits<int64_t>::max();  // larger: past any region all the same
      *field = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(most) ? most : v->get<int64_t>();
    }
  if (!p.any()) return nullptr;
  if (!shm) bad(what + ": shared memory is not served here");
  return std::make_shared<const SharedMemorySlice>(shm->slice(what, p));
}

// Writes an output's bytes to its shared memory; the parameters its reply carries instead of data.
json shared_memory_reply(const SharedMemorySlice& shm, const std::string& what, const void* data, size_t bytes) {
  shm.write(what, data, bytes);
  return {{"shared_memory_region", shm.region}, {"shared_memory_byte_size", bytes}};
}

}  // namespace

Tensor make_input_tensor(const std::string& name, const std::string& datatype, const Shape& shape,
                         const TensorSpec& spec, const std::shared_ptr<Allocator>& allocator) {
  if (name != kInputName)
    bad("unknown input " + (name.empty() ? std::string("(no name)") : "'" + name + "'") + "; the model's input is '" +
        kInputName + "'");
  if (datatype != "UINT8" && datatype != "FP32" && datatype != "BYTES")
    bad("input 'input': datatype " + datatype + " is not supported (UINT8, FP32, or BYTES for encoded images)");
  if (datatype == "BYTES") {
    if (shape.empty() || shape.size() > 2 || (shape.size() == 2 && shape[1] != 1) || shape[0] < 1 ||
        shape[0] > spec.max_batch_size)
      bad("input 'input': BYTES shape " + shape_str(shape) + ", expected [n] or [n, 1] encoded images with 1 <= n <= " +
          std::to_string(spec.max_batch_size));
    return {};
  }
  const Shape& want = spec.input;  // (C, H, W)
  const bool batch_ok = shape.size() == 4 && shape[0] >= 1 && shape[0] <= spec.max_batch_size;
  if (batch_ok && shape[1] == want[0] && shape[2] == want[1] && shape[3] == want[2])
    return Tensor(shape, datatype == "UINT8" ? DType::u8 : DType::f32, allocator);
  // UINT8 pixels may also come channels-last, [n, H, W, C] as images are stored: the bytes are
  // kept as sent, tagged nhwc, and the normalization reads them so (on the GPU, in one kernel).
  if (batch_ok && datatype == "UINT8" && shape[1] == want[1] && shape[2] == want[2] && shape[3] == want[0])
    return Tensor({shape[0], want[0], want[1], want[2]}, DType::u8, allocator, Layout::nhwc);
  bad("input 'input': shape " + shape_str(shape) + ", expected [n, " + std::to_string(want[0]) + ", " +
      std::to_string(want[1]) + ", " + std::to_string(want[2]) + "] (or UINT8 [n, " + std::to_string(want[1]) + ", " +
      std::to_string(want[2]) + ", " + std::to_string(want[0]) + "], channels-last) with 1 <= n <= " +
      std::to_string(spec.max_batch_size));
}

std::vector<std::string> split_bytes_elements(std::string_view data, int64_t n) {
  std::vector<std::string> out;
  while (!data.empty()) {
    if (data.size() < 4) bad("input 'input': BYTES data ends inside an element's 4-byte length");
    const auto* p = reinterpret_cast<const unsigned char*>(data.data());
    const uint32_t length = p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24;
    data.remove_prefix(4);
    if (length > data.size())
      bad("input 'input': BYTES element " + std::to_string(out.size()) + " is " + std::to_string(length) +
          " bytes, but only " + std::to_string(data.size()) + " follow");
    if (static_cast<int64_t>(out.size()) == n) bad("input 'input': more BYTES elements than its shape's " + std::to_string(n));
    out.emplace_back(data.substr(0, length));
    data.remove_prefix(length);
  }
  if (static_cast<int64_t>(out.size()) != n)
    bad("input 'input': " + std::to_string(out.size()) + " BYTES elements for shape [" + std::to_string(n) + "]");
  return out;
}

InferRequest parse_infer_request(std::string_view body, std::optional<size_t> header_length, const TensorSpec& spec,
                                 const SharedMemoryRegistry* shm) {
  if (header_length && *header_length > body.size())
    bad("Inference-Header-Content-Length " + std::to_string(*header_length) + " is more than the body's " +
        std::to_string(body.size()) + " bytes");
  const std::string_view header = header_length ? body.substr(0, *header_length) : body;
  std::string_view binary = header_length ? body.substr(*header_length) : std::string_view{};
  json doc = json::parse(header.begin(), header.end(), nullptr, false);
  if (doc.is_discarded()) bad("malformed JSON in the request body");
  if (!doc.is_object()) bad("the request body must be a JSON object");
  InferRequest req;
  if (const json* id = find_member(doc, "id")) {
    if (!id->is_string()) bad("'id' must be a string");
    req.id = id->get<std::string>();
  }
  bool binary_output_default = false;
  if (const json* params = find_member(doc, "parameters")) {
    if (!params->is_object()) bad("'parameters' must be an object");
    if (const json* t = find_member(*params, "timeout")) {
      if (!t->is_number_integer()) bad("parameters.timeout must be an integer number of microseconds >= 0");
      // Above 2^63 - 1 nlohmann holds it unsigned; get<int64_t> would wrap it negative.
      req.timeout_us = t->is_number_unsigned() && t->get<uint64_t>() > static_cast<uint64_t>(kMaxTimeoutUs)
                           ? kMaxTimeoutUs
                           : check_timeout(t->get<int64_t>());
    }
    if (const json* b = find_member(*params, "binary_data_output")) {
      if (!b->is_boolean()) bad("parameters.binary_data_output must be true or false");
      binary_output_default = b->get<bool>();
    }
  }
  const json* inputs = find_member(doc, "inputs");
  if (!inputs || !inputs->is_array() || inputs->size() != 1)
    bad("'inputs' must be a list of one tensor, '" + std::string(kInputName) + "'");
  const json& in = (*inputs)[0];
  if (!in.is_object()) bad("inputs[0] must be an object");
  const json* name = find_member(in, "name");
  const json* datatype = find_member(in, "datatype");
  if (!datatype || !datatype->is_string()) bad("input 'input': 'datatype' missing (UINT8 or FP32)");
  const std::string dt = datatype->get<std::string>();
  const json* shape_json = find_member(in, "shape");
  if (!shape_json || !shape_json->is_array()) bad("input 'input': 'shape' missing");
  Shape shape;
  for (const json& d : *shape_json) {
    if (!d.is_number_integer()) bad("input 'input': shape holds a non-integer");
    shape.push_back(d.get<int64_t>());
  }
  const json* params = find_member(in, "parameters");
  const auto in_shm = shared_memory_slice(params, "input 'input'", shm);
  req.input = make_input_tensor(name && name->is_string() ? name->get<std::string>() : "", dt, shape, spec,
                                in_shm ? in_shm->allocator("input 'input'") : cpu_allocator());
  const bool is_u8 = dt == "UINT8";
  const auto count = static_cast<size_t>(shape_numel(shape));
  const size_t bytes = req.input.defined() ? req.input.nbytes() : 0;
  const json* binary_size = params && params->is_object() ? find_member(*params, "binary_data_size") : nullptr;
  if (in_shm) {  // read where it is: the batch is assembled straight from the region
    if (binary_size || find_member(in, "data"))
      bad("input 'input': give its data in shared memory or in the request, not both");
    if (dt == "BYTES") req.encoded = split_bytes_elements(in_shm->read(), shape[0]);
    if (!is_u8 && req.input.defined() && req.input.device().is_cpu()) check_finite(req.input);
  } else if (dt == "BYTES") {
    if (!binary_size || !binary_size->is_number_unsigned() || !header_length)
      bad("input 'input': send BYTES (encoded images) as binary data: parameters.binary_data_size and the "
          "Inference-Header-Content-Length header");
    const auto size = binary_size->get<uint64_t>();
    if (size > binary.size())
      bad("input 'input': truncated binary data: " + std::to_string(binary.size()) + " of " + std::to_string(size) +
          " bytes");
    req.encoded = split_bytes_elements(binary.substr(0, size), shape[0]);
    binary.remove_prefix(size);
  } else if (binary_size) {
    if (!header_length) bad("input 'input': binary_data_size without an Inference-Header-Content-Length header");
    if (!binary_size->is_number_unsigned()) bad("input 'input': binary_data_size must be a byte count");
    const auto size = binary_size->get<uint64_t>();
    if (size != bytes)
      bad("input 'input': binary_data_size " + std::to_string(size) + ", but shape " + shape_str(shape) + " " + dt +
          " is " + std::to_string(bytes) + " bytes");
    if (binary.size() < bytes)
      bad("input 'input': truncated binary data: " + std::to_string(binary.size()) + " of " + std::to_string(bytes) +
          " bytes");
    std::memcpy(req.input.raw(), binary.data(), bytes);
    binary.remove_prefix(bytes);
    if (!is_u8) check_finite(req.input);
  } else {
    const json* data = find_member(in, "data");
    if (!data || !data->is_array()) bad("input 'input': 'data' missing (or give binary_data_size)");
    if (is_u8) {
      std::vector<uint8_t> values;
      flatten(*data, values, count, 0, true);
      if (values.size() != count)
        bad("input 'input': " + std::to_string(values.size()) + " data elements for shape " + shape_str(shape) +
            " (" + std::to_string(count) + ")");
      std::memcpy(req.input.raw(), values.data(), bytes);
    } else {
      std::vector<float> values;
      flatten(*data, values, count, 0, false);
      if (values.size() != count)
        bad("input 'input': " + std::to_string(values.size()) + " data elements for shape " + shape_str(shape) +
            " (" + std::to_string(count) + ")");
      std::memcpy(req.input.raw(), values.data(), bytes);
    }
  }
  if (!binary.empty()) bad(std::to_string(binary.size()) + " bytes of binary data beyond the inputs'");
  if (const json* outputs = find_member(doc, "outputs")) {
    if (!outputs->is_array()) bad("'outputs' must be a list");
    for (const json& o : *outputs) {
      const json* oname = o.is_object() ? find_member(o, "name") : nullptr;
      if (!oname || !oname->is_string()) bad("outputs: each needs a 'name'");
      const std::string n = oname->get<std::string>();
      if (n != kLogitsName && n != kProbabilitiesName)
        bad("unknown output '" + n + "'; the model's outputs are '" + kLogitsName + "' and '" + kProbabilitiesName + "'");
      RequestedOutput out{n, binary_output_default, 0, nullptr};
      const json* op = find_member(o, "parameters");
      out.shm = shared_memory_slice(op, "output '" + n + "'", shm);
      if (op && op->is_object()) {
        if (const json* b = find_member(*op, "binary_data")) {
          if (!b->is_boolean()) bad("outputs: parameters.binary_data must be true or false");
          out.binary = b->get<bool>();
        }
        if (const json* c = find_member(*op, "classification")) {
          if (!c->is_number_integer())
            bad("output '" + n + "': parameters.classification must be an integer, the number of classes to return");
          out.classification = check_classification(n, c->get<int64_t>(), spec.classes);
        }
      }
      if (out.shm && out.classification == 0)  // FP32 (rows, classes): refused now if it cannot fit
        out.shm->check_fits("output '" + n + "'", static_cast<uint64_t>(shape[0] * spec.classes) * sizeof(float));
      req.outputs.push_back(std::move(out));
    }
  }
  if (req.outputs.empty())
    req.outputs = {{kLogitsName, binary_output_default, 0, nullptr}, {kProbabilitiesName, binary_output_default, 0, nullptr}};
  return req;
}

int64_t check_timeout(int64_t timeout_us) {
  if (timeout_us < 0) bad("parameters.timeout " + std::to_string(timeout_us) + " must be microseconds >= 0");
  return timeout_us < kMaxTimeoutUs ? timeout_us : kMaxTimeoutUs;
}

int64_t check_classification(const std::string& output, int64_t k, int64_t classes) {
  if (k < 1 || k > classes)
    bad("output '" + output + "': classification " + std::to_string(k) + " is not a number of classes from 1 to " +
        std::to_string(classes));
  return k;
}

std::vector<std::string> top_k_classes(const std::vector<float>& values, int64_t classes, int64_t k,
                                       const std::vector<std::string>& labels) {
  std::vector<std::string> out;
  if (classes <= 0) return out;
  const auto c = static_cast<size_t>(classes);
  const size_t rows = values.size() / c;
  const auto top = static_cast<size_t>(std::clamp<int64_t>(k, 0, classes));
  std::vector<size_t> order(c);
  for (size_t r = 0; r < rows; ++r) {
    const float* row = values.data() + r * c;
    for (size_t i = 0; i < c; ++i) order[i] = i;
    std::partial_sort(order.begin(), order.begin() + static_cast<long>(top), order.end(),
                      [row](size_t a, size_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    for (size_t i = 0; i < top; ++i) {
      std::string s = std::to_string(row[order[i]]) + ":" + std::to_string(order[i]);
      if (order[i] < labels.size() && !labels[order[i]].empty()) s += ":" + labels[order[i]];
      out.push_back(std::move(s));
    }
  }
  return out;
}

std::string serialize_bytes_elements(const std::vector<std::string>& elements) {
  std::string out;
  for (const std::string& e : elements) {
    const auto n = static_cast<uint32_t>(e.size());
    const char length[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                            static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 24) & 0xff)};
    out.append(length, 4);
    out += e;
  }
  return out;
}

InferReplyBody make_infer_reply(const InferRequest& request, const std::string& model, int64_t version,
                                const std::vector<float>& logits, const std::vector<float>& probabilities,
                                int64_t classes, const std::vector<std::string>& class_names) {
  json doc = {{"model_name", model}, {"model_version", std::to_string(version)}};
  if (!request.id.empty()) doc["id"] = request.id;
  const auto n = static_cast<int64_t>(logits.size()) / std::max<int64_t>(classes, 1);  // rows answered
  json outputs = json::array();
  std::string binary;
  for (const auto& [name, as_binary, k, shm] : request.outputs) {
    const std::vector<float>& values = name == kLogitsName ? logits : probabilities;
    if (k > 0) {
      std::vector<std::string> top = top_k_classes(values, classes, k, class_names);
      json out = {{"name", name}, {"datatype", "BYTES"}, {"shape", {n, k}}};
      if (shm) {
        const std::string bytes = serialize_bytes_elements(top);
        out["parameters"] = shared_memory_reply(*shm, "output '" + name + "'", bytes.data(), bytes.size());
      } else if (as_binary) {
        const std::string bytes = serialize_bytes_elements(top);
        out["parameters"] = {{"binary_data_size", bytes.size()}};
        binary += bytes;
      } else {
        out["data"] = std::move(top);
      }
      outputs.push_back(std::move(out));
      continue;
    }
    json out = {{"name", name}, {"datatype", "FP32"}, {"shape", {n, classes}}};
    if (shm) {
      out["parameters"] = shared_memory_reply(*shm, "output '" + name + "'", values.data(), values.size() * sizeof(float));
    } else if (as_binary) {
      const size_t bytes = values.size() * sizeof(float);
      out["parameters"] = {{"binary_data_size", bytes}};
      binary.append(reinterpret_cast<const char*>(values.data()), bytes);
    } else {
      out["data"] = values;
    }
    outputs.push_back(std::move(out));
  }
  doc["outputs"] = std::move(outputs);
  InferReplyBody reply;
  reply.body = doc.dump();
  if (!binary.empty()) {
    reply.header_length = reply.body.size();
    reply.body += binary;
  }
  return reply;
}

}  // namespace convoy::serve
