#pragma once
// Triton's trace and logging extensions over gRPC (TraceSetting, LogSettings), through the same
// settings as HTTP's /v2[/models/<m>]/trace/setting and /v2/logging (trace.h, log_settings.h).
#include <grpcpp/grpcpp.h>

#include "apps/serve/log_settings.h"
#include "apps/serve/repository.h"
#include "apps/serve/trace.h"
#include "kserve_v2.pb.h"

namespace convoy::serve {

// Updates the settings the request names (none: reads them) and answers with all of them.
// INVALID_ARGUMENT for an unknown model or a bad setting, UNIMPLEMENTED for trace_file.
grpc::Status trace_setting_rpc(RequestTracer& tracer, const ModelRepository& repository,
                               const inference::TraceSettingRequest& request, inference::TraceSettingResponse& response);
// The same for the log: INVALID_ARGUMENT for an unknown setting or a wrong type, UNIMPLEMENTED for
// log_file.
grpc::Status log_settings_rpc(ServeLog& log, const inference::LogSettingsRequest& request,
                              inference::LogSettingsResponse& response);

}  // namespace convoy::serve
