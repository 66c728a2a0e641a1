#pragma once
// The KServe v2 endpoints of `convoy serve`, described once for both protocols: each operation's
// HTTP method and path, which the Router dispatches through (routes.cpp), and the
// GRPCInferenceService method that serves it (grpc/grpc_server.cpp); and the parts of the
// operations that both protocols share, so that only the wire formats differ.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apps/serve/metrics.h"
#include "apps/serve/repository.h"
#include "apps/serve/served_model.h"
#include "engine/core/tensor.h"

namespace convoy::serve {

enum class Operation {
  server_metadata,
  server_live,
  server_ready,
  repository_index,
  model_load,
  model_unload,
  model_metadata,
  model_config,
  model_ready,
  model_infer,
  model_classify,
  model_statistics,
  system_shm_status,  // Triton's shared-memory extensions (shared_memory.h)
  system_shm_register,
  system_shm_unregister,
  cuda_shm_status,
  cuda_shm_register,
  cuda_shm_unregister,
  trace_setting,  // Triton's trace extension (trace.h)
  log_settings,   // Triton's logging extension (log_settings.h)
};

struct Endpoint {
  Operation operation;
  std::string_view method;  // HTTP; empty, as the path: gRPC only
  // The HTTP path: literal segments, {model}, {version} (a positive integer) and {region} captured;
  // "[/versions/{version}]" may be left out (the newest ready version), "[/region/{region}]" too
  // (every region).
  std::string_view path;
  std::string_view grpc_method;  // in GRPCInferenceService; empty: HTTP only
};

// Every endpoint, one row each. A request's path and method match at most one row; another
// method on a row's path is a 405 (Triton's), a path of none a 404.
inline constexpr Endpoint kEndpoints[] = {
    {Operation::server_metadata, "GET", "/v2", "ServerMetadata"},
    {Operation::server_live, "GET", "/v2/health/live", "ServerLive"},
    {Operation::server_ready, "GET", "/v2/health/ready", "ServerReady"},
    {Operation::repository_index, "POST", "/v2/repository/index", "RepositoryIndex"},
    {Operation::model_load, "POST", "/v2/repository/models/{model}/load", "RepositoryModelLoad"},
    {Operation::model_unload, "POST", "/v2/repository/models/{model}/unload", "RepositoryModelUnload"},
    // Every model's statistics; before the metadata's row, whose {model} would take "stats".
    {Operation::model_statistics, "GET", "/v2/models/stats", ""},
    {Operation::model_metadata, "GET", "/v2/models/{model}[/versions/{version}]", "ModelMetadata"},
    {Operation::model_config, "GET", "/v2/models/{model}[/versions/{version}]/config", "ModelConfig"},
    {Operation::model_ready, "GET", "/v2/models/{model}[/versions/{version}]/ready", "ModelReady"},
    {Operation::model_infer, "POST", "/v2/models/{model}[/versions/{version}]/infer", "ModelInfer"},
    {Operation::model_classify, "POST", "/v2/models/{model}[/versions/{version}]/classify", ""},
    {Operation::model_statistics, "GET", "/v2/models/{model}[/versions/{version}]/stats", "ModelStatistics"},
    {Operation::system_shm_status, "GET", "/v2/systemsharedmemory[/region/{region}]/status", "SystemSharedMemoryStatus"},
    {Operation::system_shm_register, "POST", "/v2/systemsharedmemory/region/{region}/register",
     "SystemSharedMemoryRegister"},
    {Operation::system_shm_unregister, "POST", "/v2/systemsharedmemory[/region/{region}]/unregister",
     "SystemSharedMemoryUnregister"},
    {Operation::cuda_shm_status, "GET", "/v2/cudasharedmemory[/region/{region}]/status", "CudaSharedMemoryStatus"},
    {Operation::cuda_shm_register, "POST", "/v2/cudasharedmemory/region/{region}/register", "CudaSharedMemoryRegister"},
    {Operation::cuda_shm_unregister, "POST", "/v2/cudasharedmemory[/region/{region}]/unregister",
     "CudaSharedMemoryUnregister"},
    // ModelInfer's requests on a bidirectional stream, answered as they finish (grpc/stream_infer.h).
    {Operation::model_infer, "", "", "ModelStreamInfer"},
    {Operation::trace_setting, "GET", "/v2/trace/setting", "TraceSetting"},
    {Operation::trace_setting, "POST", "/v2/trace/setting", ""},
    {Operation::trace_setting, "GET", "/v2/models/{model}/trace/setting", ""},
    {Operation::trace_setting, "POST", "/v2/models/{model}/trace/setting", ""},
    {Operation::log_settings, "GET", "/v2/logging", "LogSettings"},
    {Operation::log_settings, "POST", "/v2/logging", ""},
};

// The server metadata (GET /v2, ServerMetadata); its version is CONVOY_VERSION. Its extensions are
// these, and "cuda_shared_memory" where CUDA is built in and a GPU usable (server_extensions()).
inline constexpr const char* kServerName = "convoy";
inline constexpr const char* kServerExtensions[] = {"binary_tensor_data", "model_repository", "model_configuration",
                                                   "classification",     "statistics",       "trace",
                                                   "logging",            "system_shared_memory"};
std::vector<std::string> server_extensions();

// A version or count as written in a request: digits only, at most 18 of them; else nullopt.
std::optional<int64_t> parse_count(std::string_view text);

// What a model's metadata says (GET /v2/models/{model}, ModelMetadata): one FP32 input of
// (-1, C, H, W) and two FP32 outputs (logits, probabilities) of (-1, classes).
struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;  // the ready ones
  std::vector<int64_t> input_shape;   // (-1, C, H, W)
  int64_t classes = 0;
};
ModelMetadata model_metadata(const ModelRepository& repository, const std::string& model, const ServedVersion& served);

// Load and unload (model_load, model_unload) are allowed only with --model-control explicit;
// otherwise they are refused with this message.
inline constexpr const char* kExplicitControlOnly =
    "explicit model load / unload is not allowed unless --model-control explicit";
// Loads (model_load) or unloads (model_unload) `model`; false, doing nothing, unless the
// repository's control is explicit. The repository's errors pass through.
bool load_or_unload(ModelRepository& repository, Operation operation, const std::string& model);
// A load's or unload's parameter, as either protocol carries it.
struct RepositoryParameter {
  std::string name;
  bool is_bool = false;
};
// RequestError 501 for any load parameter (Triton's "config" and "file:..." overrides: a Convoy
// model loads as its folder has it), 400 for an unload's unload_dependents that is not a bool;
// other unload parameters are ignored, as Triton ignores them.
void check_repository_parameters(Operation operation, const std::vector<RepositoryParameter>& parameters);

// Queues `input` (n, C, H, W), or the `encoded` images where `input` is undefined, on `served`
// with a deadline of timeout_us from now (0 or less: none; cut to kMaxTimeoutUs, one hour). `done` gets the result on an instance thread, a success already counted in `metrics`
// with its duration. False when the queue is full: the request is counted as failed and `done`
// never runs. A request the tracer samples (trace.h) is traced, with its `request_id`, once
// `done` returned.
bool submit_request(const std::shared_ptr<ServedVersion>& served, MetricsRegistry& metrics, Tensor input,
                    std::vector<std::string> encoded, int64_t timeout_us, std::function<void(InferResult)> done,
                    const std::string& request_id = {});

}  // namespace convoy::serve
