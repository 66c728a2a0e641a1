#include "apps/serve/triton_config.h"

#include <nlohmann/json.hpp>

#include "apps/serve/kserve_json.h"
#include "engine/core/precision.h"

namespace convoy::serve {

using json = nlohmann::json;

namespace {

json version_policy(const VersionPolicy& p) {
  switch (p.kind) {
    case VersionPolicy::Kind::all:
      return {{"all", json::object()}};
    case VersionPolicy::Kind::specific:
      return {{"specific", {{"versions", p.specific}}}};
    case VersionPolicy::Kind::latest:
      break;
  }
  return {{"latest", {{"num_versions", p.latest}}}};
}

// One instance group: `count` instances on `device` ("cpu" or "cuda:N").
json instance_group(const std::string& model, int64_t count, const std::string& device) {
  const bool gpu = device.rfind("cuda", 0) == 0;
  json gpus = json::array();
  if (gpu) gpus.push_back(device.size() > 5 ? std::stoi(device.substr(5)) : 0);
  return {{"name", model + "_0"}, {"kind", gpu ? "KIND_GPU" : "KIND_CPU"}, {"count", count}, {"gpus", gpus}};
}

}  // namespace

std::string triton_model_config_json(const ServedVersion& served) {
  const ModelConfig& c = served.config();
  const Shape& chw = served.input_shape();  // (C, H, W)
  const json classes = json::array({served.classes()});
  json outputs = json::array();
  for (const char* name : {kLogitsName, kProbabilitiesName})
    outputs.push_back({{"name", name}, {"data_type", "TYPE_FP32"}, {"dims", classes}});
  const Preprocess& p = served.preprocess();
  const json preprocessing = {{"channels", p.channels}, {"height", p.height}, {"width", p.width}, {"resize", p.resize}};
  const std::pair<const char*, std::string> parameters[] = {
      {"class_names", json(served.class_names()).dump()},
      {"preprocessing", preprocessing.dump()},
      // FP32 model input as the input's data_type says; UINT8 pixels normalized with the
      // checkpoint's mean and std; BYTES: encoded JPEG or PNG images, shape [n] or [n, 1].
      {"input_datatypes", "FP32,UINT8,BYTES"},
      {"device", served.device()},
      {"precision", c.precision ? to_string(*c.precision) : "auto"},
      {"execution", served.execution()},
      {"max_memory", std::to_string(c.max_memory)},
      {"estimated_memory", std::to_string(served.memory().total)},
  };
  json params = json::object();
  for (const auto& [key, value] : parameters) params[key] = {{"string_value", value}};
  json doc = {
      {"name", c.name},
      {"platform", "convoy"},
      {"backend", "convoy"},
      {"version_policy", version_policy(c.version_policy)},
      {"max_batch_size", c.max_batch_size},
      {"input", {{{"name", kInputName}, {"data_type", "TYPE_FP32"}, {"format", "FORMAT_NCHW"}, {"dims", chw}}}},
      {"output", outputs},
      {"instance_group", json::array({instance_group(c.name, c.instance_count, served.device())})},
      {"parameters", params},
  };
  if (c.dynamic_batching)
    doc["dynamic_batching"] = {{"preferred_batch_size", c.preferred_batch_size},
                               {"max_queue_delay_microseconds", c.max_queue_delay_us},
                               {"default_queue_policy",
                                {{"timeout_action", "REJECT"},
                                 {"default_timeout_microseconds", c.default_timeout_us},
                                 {"allow_timeout_override", true},
                                 {"max_queue_size", c.max_queue_size}}}};
  return doc.dump();
}

}  // namespace convoy::serve
