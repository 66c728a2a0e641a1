#include "apps/serve/kserve_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>

#include <nlohmann/json.hpp>

#include "apps/serve/model_config.h"
#include "apps/serve/shared_memory.h"

namespace convoy::serve {

using json = nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& what) { throw RequestError(400, what); }

// A JSON string literal; bytes that are not UTF-8 (a label from a checkpoint, say) are replaced,
// as nlohmann would otherwise throw.
void append_string(std::string& out, const std::string& s) {
  out += json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

// A float as JSON: the shortest text that reads back as the same double (nlohmann's DOM wrote
// the same), null where it is not finite (as nlohmann).
void append_number(std::string& out, float x) {
  if (!std::isfinite(x)) {
    out += "null";
    return;
  }
  char text[32];
  out.append(text, std::to_chars(text, text + sizeof(text), static_cast<double>(x)).ptr);
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
  if (batch_ok && shape[1] == want[0] && shape[2] == want[1] && shape[3] == want[2]) {
    Tensor t(shape, datatype == "UINT8" ? DType::u8 : DType::f32, allocator);
    // Shared memory allows any offset; FP32 read in place off a float's boundary would be
    // misaligned on every load: a host slice is copied to aligned memory, a GPU's refused.
    if (t.dtype() == DType::f32 && reinterpret_cast<uintptr_t>(t.raw()) % alignof(float) != 0) {
      if (!t.device().is_cpu()) bad("input 'input': FP32 data in CUDA shared memory must start at a multiple of 4 bytes");
      return t.to(cpu_allocator());
    }
    return t;
  }
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

// Written as text, the members in the order nlohmann's DOM wrote them (sorted): an output of
// (n, 1000) floats needs no JSON value per element.
InferReplyBody make_infer_reply(const InferRequest& request, const std::string& model, int64_t version,
                                const std::vector<float>& logits, const std::vector<float>& probabilities,
                                int64_t classes, const std::vector<std::string>& class_names) {
  const auto n = static_cast<int64_t>(logits.size()) / std::max<int64_t>(classes, 1);  // rows answered
  std::string out, binary;
  size_t json_values = 0;  // written as text: about 24 bytes each
  for (const RequestedOutput& o : request.outputs) json_values += o.binary || o.shm ? 0 : logits.size();
  out.reserve(256 + json_values * 24);
  out += '{';
  if (!request.id.empty()) {
    out += "\"id\":";
    append_string(out, request.id);
    out += ',';
  }
  out += "\"model_name\":";
  append_string(out, model);
  out += ",\"model_version\":\"" + std::to_string(version) + "\",\"outputs\":[";
  for (size_t i = 0; i < request.outputs.size(); ++i) {
    const auto& [name, as_binary, k, shm] = request.outputs[i];
    const std::vector<float>& values = name == kLogitsName ? logits : probabilities;
    const std::vector<std::string> top = k > 0 ? top_k_classes(values, classes, k, class_names) : std::vector<std::string>{};
    out += i ? ",{" : "{";
    if (!as_binary && !shm) {
      out += "\"data\":[";
      for (size_t j = 0; k > 0 && j < top.size(); ++j) {
        if (j) out += ',';
        append_string(out, top[j]);
      }
      for (size_t j = 0; k == 0 && j < values.size(); ++j) {
        if (j) out += ',';
        append_number(out, values[j]);
      }
      out += "],";
    }
    out += k > 0 ? "\"datatype\":\"BYTES\",\"name\":" : "\"datatype\":\"FP32\",\"name\":";
    append_string(out, name);
    if (shm) {  // written there; the reply says where instead of holding the data
      const std::string bytes = k > 0 ? serialize_bytes_elements(top) : std::string();
      const void* data = k > 0 ? static_cast<const void*>(bytes.data()) : values.data();
      const size_t size = k > 0 ? bytes.size() : values.size() * sizeof(float);
      shm->write("output '" + name + "'", data, size);
      out += ",\"parameters\":{\"shared_memory_byte_size\":" + std::to_string(size) + ",\"shared_memory_region\":";
      append_string(out, shm->region);
      out += '}';
    } else if (as_binary) {
      const size_t before = binary.size();
      if (k > 0)
        binary += serialize_bytes_elements(top);
      else
        binary.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
      out += ",\"parameters\":{\"binary_data_size\":" + std::to_string(binary.size() - before) + "}";
    }
    out += ",\"shape\":[" + std::to_string(n) + "," + std::to_string(k > 0 ? k : classes) + "]}";
  }
  out += "]}";
  InferReplyBody reply;
  reply.body = std::move(out);
  if (!binary.empty()) {
    reply.header_length = reply.body.size();
    reply.body += binary;
  }
  return reply;
}

}  // namespace convoy::serve
