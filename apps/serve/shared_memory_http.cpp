// The HTTP side of Triton's shared-memory extensions: /v2/systemsharedmemory/... and
// /v2/cudasharedmemory/... (register, unregister, status), in Triton's JSON.
#include <nlohmann/json.hpp>

#include "apps/serve/routes.h"
#include "apps/serve/shared_memory.h"
#include "engine/core/error.h"

namespace convoy::serve {

using json = nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& what) { throw RequestError(400, what); }

// A register request's non-negative integer `key`; `fallback` when absent and optional.
uint64_t count_field(const json& body, const char* key, const std::string& what, std::optional<uint64_t> fallback) {
  const auto it = body.find(key);
  if (it == body.end()) {
    if (fallback) return *fallback;
    bad(what + ": '" + key + "' missing");
  }
  if (!it->is_number_unsigned()) bad(what + ": '" + key + "' must be an integer 0 or more");
  return it->get<uint64_t>();
}

// RFC 4648 base64 (padding optional); RequestError(400) on any other character.
std::string base64_decode(const std::string& text, const std::string& what) {
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  size_t end = text.size();
  while (end > 0 && text[end - 1] == '=') --end;
  for (size_t i = 0; i < end; ++i) {
    const char c = text[i];
    int v = c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26 : c >= '0' && c <= '9' ? c - '0' + 52
            : c == '+' ? 62 : c == '/' ? 63 : -1;
    if (v < 0) bad(what + ": raw_handle.b64 is not base64");
    bits = bits << 6 | static_cast<uint32_t>(v);
    if (++count == 4) {
      out += static_cast<char>(bits >> 16);
      out += static_cast<char>(bits >> 8 & 0xff);
      out += static_cast<char>(bits & 0xff);
      bits = 0;
      count = 0;
    }
  }
  if (count == 1) bad(what + ": raw_handle.b64 is not base64");
  if (count >= 2) out += static_cast<char>(bits >> (count == 2 ? 4 : 10));
  if (count == 3) out += static_cast<char>(bits >> 2 & 0xff);
  return out;
}

json register_body(const std::string& body, const std::string& what) {
  json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) bad(what + ": the body must be a JSON object");
  return doc;
}

HttpReply json_reply(const json& doc) {
  HttpReply r;
  r.body = doc.dump();
  return r;
}

}  // namespace

HttpReply shared_memory_reply(SharedMemoryRegistry& shm, Operation operation, const std::string& region,
                              const std::string& body) {
  try {
    switch (operation) {
      case Operation::system_shm_status: {
        json out = json::array();
        for (const SystemRegionStatus& s : shm.system_status(region))
          out.push_back({{"name", s.name}, {"key", s.key}, {"offset", s.offset}, {"byte_size", s.byte_size}});
        return json_reply(out);
      }
      case Operation::cuda_shm_status: {
        json out = json::array();
        for (const CudaRegionStatus& s : shm.cuda_status(region))
          out.push_back({{"name", s.name}, {"device_id", s.device_id}, {"byte_size", s.byte_size}});
        return json_reply(out);
      }
      case Operation::system_shm_register: {
        const std::string what = "system shared memory region '" + region + "'";
        const json doc = register_body(body, what);
        const auto key = doc.find("key");
        if (key == doc.end() || !key->is_string()) bad(what + ": 'key' (the shared-memory object's name) missing");
        shm.register_system(region, key->get<std::string>(), count_field(doc, "offset", what, 0),
                            count_field(doc, "byte_size", what, std::nullopt));
        return json_reply(json::object());
      }
      case Operation::cuda_shm_register: {
        const std::string what = "CUDA shared memory region '" + region + "'";
        const json doc = register_body(body, what);
        const auto handle = doc.find("raw_handle");
        if (handle == doc.end() || !handle->is_object() || !handle->contains("b64") || !handle->at("b64").is_string())
          bad(what + ": 'raw_handle' must be {\"b64\": the cudaIpcMemHandle_t in base64}");
        shm.register_cuda(region, base64_decode(handle->at("b64").get<std::string>(), what),
                          static_cast<int64_t>(count_field(doc, "device_id", what, std::nullopt)),
                          count_field(doc, "byte_size", what, std::nullopt));
        return json_reply(json::object());
      }
      case Operation::system_shm_unregister:
        shm.unregister_system(region);
        return json_reply(json::object());
      case Operation::cuda_shm_unregister:
        shm.unregister_cuda(region);
        return json_reply(json::object());
      default:
        break;
    }
  } catch (const RequestError& e) {
    return error_reply(e.status(), e.what());
  } catch (const Error& e) {  // a CUDA call that failed (DeviceError)
    return error_reply(400, e.what());
  }
  return error_reply(404, "not a shared-memory endpoint");
}

}  // namespace convoy::serve
