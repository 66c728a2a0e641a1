#include "apps/serve/grpc/settings_rpc.h"

#include "apps/serve/kserve_json.h"

namespace convoy::serve {

namespace {

// The settings' refusals as Triton's gRPC codes: 501 (a file location) is UNIMPLEMENTED.
grpc::Status refused(const RequestError& e) {
  return grpc::Status(e.status() == 501 ? grpc::StatusCode::UNIMPLEMENTED : grpc::StatusCode::INVALID_ARGUMENT, e.what());
}

}  // namespace

grpc::Status trace_setting_rpc(RequestTracer& tracer, const ModelRepository& repository,
                               const inference::TraceSettingRequest& request, inference::TraceSettingResponse& response) {
  try {
    check_trace_model(repository, request.model_name());
    if (!request.settings().empty()) {
      std::vector<std::pair<std::string, std::optional<std::vector<std::string>>>> settings;
      for (const auto& [name, value] : request.settings()) {
        std::optional<std::vector<std::string>> values;  // no value: cleared
        if (value.value_size() > 0) values.emplace(value.value().begin(), value.value().end());
        settings.emplace_back(name, std::move(values));
      }
      tracer.update(request.model_name(), parse_trace_update(settings));
    }
  } catch (const RequestError& e) {
    return refused(e);
  }
  for (const auto& [name, values] : trace_setting_values(tracer.settings(request.model_name())))
    for (const std::string& v : values) (*response.mutable_settings())[name].add_value(v);
  return grpc::Status::OK;
}

grpc::Status log_settings_rpc(ServeLog& log, const inference::LogSettingsRequest& request,
                              inference::LogSettingsResponse& response) {
  using Value = inference::LogSettingsRequest::SettingValue;
  std::vector<std::pair<std::string, LogValue>> settings;
  for (const auto& [name, value] : request.settings()) {
    LogValue v;  // no choice: null, which changes nothing
    if (value.parameter_choice_case() == Value::kBoolParam) v = value.bool_param();
    if (value.parameter_choice_case() == Value::kUint32Param) v = static_cast<int64_t>(value.uint32_param());
    if (value.parameter_choice_case() == Value::kStringParam) v = value.string_param();
    settings.emplace_back(name, std::move(v));
  }
  LogSettings s;
  try {
    s = log.update(settings);
  } catch (const RequestError& e) {
    return refused(e);
  }
  auto& out = *response.mutable_settings();
  out["log_file"].set_string_param(s.file);
  out["log_info"].set_bool_param(s.info);
  out["log_warning"].set_bool_param(s.warning);
  out["log_error"].set_bool_param(s.error);
  out["log_verbose_level"].set_uint32_param(s.verbose_level);
  out["log_format"].set_string_param(s.format);
  return grpc::Status::OK;
}

}  // namespace convoy::serve
