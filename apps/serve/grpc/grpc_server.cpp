// The KServe v2 GRPCInferenceService on gRPC's synchronous server: each call runs on one of
// gRPC's threads, and ModelInfer waits there for its batch, which the model's instances run.
// Each method serves the operation of its row in kEndpoints (apps/serve/endpoints.h) through
// the same shared parts as the HTTP endpoint; only the messages and status codes are gRPC's.
#include <cmath>
#include <cstring>
#include <future>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include "apps/serve/endpoints.h"
#include "apps/serve/grpc/grpc_request.h"
#include "apps/serve/grpc/health_service.h"
#include "apps/serve/grpc/shared_memory_rpc.h"
#include "apps/serve/grpc/settings_rpc.h"
#include "apps/serve/grpc/stream_infer.h"
#include "apps/serve/grpc_endpoint.h"
#include "apps/serve/image_budget.h"
#include "apps/serve/kserve_json.h"
#include "apps/serve/triton_config.h"
#include "apps/serve/triton_stats.h"
#include "engine/core/error.h"
#include "kserve_v2.grpc.pb.h"

namespace convoy::serve {

namespace {

using grpc::ServerContext;
using grpc::Status;
using grpc::StatusCode;

// HTTP statuses of RequestError and InferResult, as gRPC codes (Triton's mapping).
StatusCode code_of(unsigned http_status) {
  switch (http_status) {
    case 404:
      return StatusCode::NOT_FOUND;
    case 503:
      return StatusCode::UNAVAILABLE;
    case 504:
      return StatusCode::DEADLINE_EXCEEDED;
    case 500:
      return StatusCode::INTERNAL;
    case 501:
      return StatusCode::UNIMPLEMENTED;
    default:
      return StatusCode::INVALID_ARGUMENT;
  }
}

// Triton's answer to a repository call that names a repository: there is one.
constexpr const char* kNoRepositoryName = "'repository_name' specification is not supported";

// A request's model version: "" is the newest ready one (0); -1 for text that is not a version.
int64_t parse_version(const std::string& text) {
  if (text.empty()) return 0;
  return parse_count(text).value_or(-1);
}

// ModelStreamInfer is on gRPC's callback API, its messages as bytes (stream_infer.h); the other
// methods are synchronous.
class Service final : public inference::GRPCInferenceService::WithRawCallbackMethod_ModelStreamInfer<
                          inference::GRPCInferenceService::Service> {
 public:
  Service(ModelRepository& repository, MetricsRegistry& metrics, const std::atomic<bool>& ready,
          SharedMemoryRegistry& shm)
      : repository_(repository), metrics_(metrics), ready_(ready), shm_(shm),
        streams_([this](const inference::ModelInferRequest& q, inference::ModelInferResponse& r) {
          return infer_or_refuse(q, r);
        }) {}

  Status ServerLive(ServerContext*, const inference::ServerLiveRequest*, inference::ServerLiveResponse* r) override {
    r->set_live(true);
    return Status::OK;
  }
  Status ServerReady(ServerContext*, const inference::ServerReadyRequest*, inference::ServerReadyResponse* r) override {
    r->set_ready(ready_);
    return Status::OK;
  }
  Status ServerMetadata(ServerContext*, const inference::ServerMetadataRequest*,
                        inference::ServerMetadataResponse* r) override {
    r->set_name(kServerName);
    r->set_version(CONVOY_VERSION);
    for (const std::string& e : server_extensions()) r->add_extensions(e);
    return Status::OK;
  }
  // A model not in the repository is NOT_FOUND (as for ModelMetadata); a version not ready is
  // ready: false.
  Status ModelReady(ServerContext*, const inference::ModelReadyRequest* q, inference::ModelReadyResponse* r) override {
    if (!repository_.has_model(q->name())) return Status(StatusCode::NOT_FOUND, "unknown model '" + q->name() + "'");
    std::string why;
    const int64_t v = parse_version(q->version());
    if (v < 0) return Status(StatusCode::INVALID_ARGUMENT, "bad version '" + q->version() + "'");
    r->set_ready(repository_.find(q->name(), v, why) != nullptr);
    return Status::OK;
  }
  // Triton's ModelConfig, from the text GET .../config returns (triton_config.h), parsed strictly:
  // a field the message lacks is an INTERNAL error, never dropped.
  Status ModelConfig(ServerContext*, const inference::ModelConfigRequest* q,
                     inference::ModelConfigResponse* r) override {
    std::string why;
    const int64_t v = parse_version(q->version());
    const auto served = v < 0 ? nullptr : repository_.find(q->name(), v, why);
    if (v < 0) return Status(StatusCode::INVALID_ARGUMENT, "bad version '" + q->version() + "'");
    if (!served) return Status(StatusCode::NOT_FOUND, why);
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = false;
    const auto parsed = google::protobuf::util::JsonStringToMessage(triton_model_config_json(*served),
                                                                    r->mutable_config(), options);
    if (!parsed.ok()) return Status(StatusCode::INTERNAL, "model config: " + std::string(parsed.message()));
    return Status::OK;
  }
  Status ModelMetadata(ServerContext*, const inference::ModelMetadataRequest* q,
                       inference::ModelMetadataResponse* r) override {
    std::string why;
    const int64_t v = parse_version(q->version());
    const auto served = v < 0 ? nullptr : repository_.find(q->name(), v, why);
    if (v < 0) return Status(StatusCode::INVALID_ARGUMENT, "bad version '" + q->version() + "'");
    if (!served) return Status(StatusCode::NOT_FOUND, why);
    const serve::ModelMetadata meta = model_metadata(repository_, q->name(), *served);
    r->set_name(meta.name);
    r->set_platform("convoy");
    for (const std::string& rv : meta.versions) r->add_versions(rv);
    auto* in = r->add_inputs();
    in->set_name(kInputName);
    in->set_datatype("FP32");
    for (int64_t d : meta.input_shape) in->add_shape(d);
    for (const char* name : {kLogitsName, kProbabilitiesName}) {
      auto* out = r->add_outputs();
      out->set_name(name);
      out->set_datatype("FP32");
      out->add_shape(-1);
      out->add_shape(meta.classes);
    }
    return Status::OK;
  }
  Status RepositoryIndex(ServerContext*, const inference::RepositoryIndexRequest* q,
                         inference::RepositoryIndexResponse* r) override {
    if (!q->repository_name().empty()) return Status(StatusCode::UNIMPLEMENTED, kNoRepositoryName);
    for (const IndexEntry& e : repository_.index()) {
      if (q->ready() && e.state != "READY") continue;
      auto* m = r->add_models();
      m->set_name(e.name);
      m->set_version(e.version);
      m->set_state(e.state);
      m->set_reason(e.reason);
    }
    return Status::OK;
  }
  Status RepositoryModelLoad(ServerContext*, const inference::RepositoryModelLoadRequest* q,
                             inference::RepositoryModelLoadResponse*) override {
    return load_or_unload_call(Operation::model_load, *q);
  }
  Status RepositoryModelUnload(ServerContext*, const inference::RepositoryModelUnloadRequest* q,
                               inference::RepositoryModelUnloadResponse*) override {
    return load_or_unload_call(Operation::model_unload, *q);
  }

  // Triton's statistics, from the text GET .../stats returns (triton_stats.h), parsed strictly.
  Status ModelStatistics(ServerContext*, const inference::ModelStatisticsRequest* q,
                         inference::ModelStatisticsResponse* r) override {
    const int64_t v = parse_version(q->version());
    if (v < 0) return Status(StatusCode::INVALID_ARGUMENT, "bad version '" + q->version() + "'");
    if (q->name().empty() && v != 0)
      return Status(StatusCode::INVALID_ARGUMENT, "a version (" + q->version() + ") without a model name");
    try {
      google::protobuf::util::JsonParseOptions options;
      options.ignore_unknown_fields = false;
      const auto parsed = google::protobuf::util::JsonStringToMessage(
          model_statistics_json(repository_, metrics_, q->name(), v), r, options);
      if (!parsed.ok()) return Status(StatusCode::INTERNAL, "model statistics: " + std::string(parsed.message()));
    } catch (const RequestError& e) {
      return Status(code_of(e.status()), e.what());
    }
    return Status::OK;
  }

  // Triton's shared-memory extensions (shared_memory_rpc.h).
  Status SystemSharedMemoryStatus(ServerContext*, const inference::SystemSharedMemoryStatusRequest* q,
                                  inference::SystemSharedMemoryStatusResponse* r) override {
    return system_shm_status(shm_, *q, *r);
  }
  Status SystemSharedMemoryRegister(ServerContext*, const inference::SystemSharedMemoryRegisterRequest* q,
                                    inference::SystemSharedMemoryRegisterResponse*) override {
    return system_shm_register(shm_, *q);
  }
  Status SystemSharedMemoryUnregister(ServerContext*, const inference::SystemSharedMemoryUnregisterRequest* q,
                                      inference::SystemSharedMemoryUnregisterResponse*) override {
    return system_shm_unregister(shm_, *q);
  }
  Status CudaSharedMemoryStatus(ServerContext*, const inference::CudaSharedMemoryStatusRequest* q,
                                inference::CudaSharedMemoryStatusResponse* r) override {
    return cuda_shm_status(shm_, *q, *r);
  }
  Status CudaSharedMemoryRegister(ServerContext*, const inference::CudaSharedMemoryRegisterRequest* q,
                                  inference::CudaSharedMemoryRegisterResponse*) override {
    return cuda_shm_register(shm_, *q);
  }
  Status CudaSharedMemoryUnregister(ServerContext*, const inference::CudaSharedMemoryUnregisterRequest* q,
                                    inference::CudaSharedMemoryUnregisterResponse*) override {
    return cuda_shm_unregister(shm_, *q);
  }

  Status ModelInfer(ServerContext*, const inference::ModelInferRequest* q, inference::ModelInferResponse* r) override {
    return infer_or_refuse(*q, *r);
  }
  StreamInfer::Reactor* ModelStreamInfer(grpc::CallbackServerContext* context) override {
    return streams_.open(context);
  }
  // Streams end before the server's shutdown, which would otherwise wait for them to its deadline.
  void end_streams() { streams_.shutdown(); }

  // Triton's trace and logging extensions (settings_rpc.h).
  Status TraceSetting(ServerContext*, const inference::TraceSettingRequest* q,
                      inference::TraceSettingResponse* r) override {
    return trace_setting_rpc(metrics_.tracer(), repository_, *q, *r);
  }
  Status LogSettings(ServerContext*, const inference::LogSettingsRequest* q, inference::LogSettingsResponse* r) override {
    return log_settings_rpc(metrics_.log(), *q, *r);
  }

 private:
  // ModelInfer's work, a request of a stream's too: the answer, or the status that refuses it.
  Status infer_or_refuse(const inference::ModelInferRequest& q, inference::ModelInferResponse& r) {
    try {
      return infer(q, r);
    } catch (const RequestError& e) {
      return Status(code_of(e.status()), e.what());
    } catch (const Error& e) {
      return Status(StatusCode::INVALID_ARGUMENT, e.what());
    }
  }

  // A RepositoryModelLoadRequest or RepositoryModelUnloadRequest.
  template <class Request>
  Status load_or_unload_call(Operation operation, const Request& q) {
    if (!q.repository_name().empty()) return Status(StatusCode::UNIMPLEMENTED, kNoRepositoryName);
    try {
      std::vector<RepositoryParameter> parameters;
      for (const auto& [name, value] : q.parameters())
        parameters.push_back({name, value.parameter_choice_case() == inference::ModelRepositoryParameter::kBoolParam});
      check_repository_parameters(operation, parameters);
      if (!load_or_unload(repository_, operation, q.model_name()))
        return Status(StatusCode::UNAVAILABLE, kExplicitControlOnly);
    } catch (const RequestError& e) {
      return Status(code_of(e.status()), e.what());
    } catch (const Error& e) {
      return Status(StatusCode::INVALID_ARGUMENT, e.what());
    }
    return Status::OK;
  }

  Status infer(const inference::ModelInferRequest& q, inference::ModelInferResponse& r) {
    std::string why;
    const int64_t version = parse_version(q.model_version());
    if (version < 0) return Status(StatusCode::INVALID_ARGUMENT, "bad version '" + q.model_version() + "'");
    const std::shared_ptr<ServedVersion> served = repository_.find(q.model_name(), version, why);
    if (!served) return Status(StatusCode::NOT_FOUND, why);
    const TensorSpec spec{served->input_shape(), served->config().max_batch_size, served->classes()};
    InferRequest req = grpc_infer_request(q, spec, shm_);
    admit_images(*served, req.encoded, req.input, repository_.image_budget(), metrics_);

    std::promise<InferResult> promise;
    std::future<InferResult> future = promise.get_future();
    const int64_t n = req.input.defined() ? req.input.dim(0) : static_cast<int64_t>(req.encoded.size());
    if (!submit_request(served, metrics_, std::move(req.input), std::move(req.encoded), req.timeout_us,
                        [&promise](InferResult result) { promise.set_value(std::move(result)); }, q.id()))
      return Status(StatusCode::UNAVAILABLE, "model '" + served->config().name + "': the queue is full");
    InferResult result = future.get();
    if (result.status != InferResult::Status::ok)
      return Status(result.status == InferResult::Status::timeout   ? StatusCode::DEADLINE_EXCEEDED
                    : result.status == InferResult::Status::invalid ? StatusCode::INVALID_ARGUMENT
                                                                    : StatusCode::INTERNAL,
                    result.error);
    r.set_model_name(served->config().name);
    r.set_model_version(std::to_string(served->version()));
    r.set_id(q.id());
    // An output in shared memory is written there, and keeps its place in raw_output_contents empty.
    for (const auto& [name, binary, k, out_shm] : req.outputs) {
      const std::vector<float>& values = name == kLogitsName ? result.logits : result.probabilities;
      auto* out = r.add_outputs();
      out->set_name(name);
      out->add_shape(n);
      std::string bytes;
      if (k > 0) {  // Triton's classification: BYTES (n, k), serialized in raw_output_contents as every output is
        out->set_datatype("BYTES");
        out->add_shape(k);
        bytes = serialize_bytes_elements(top_k_classes(values, served->classes(), k, served->class_names()));
      } else {
        out->set_datatype("FP32");
        out->add_shape(served->classes());
        bytes.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
      }
      if (out_shm) {
        write_shared_memory_output(*out_shm, "output '" + name + "'", bytes.data(), bytes.size(), *out);
        bytes.clear();
      }
      r.add_raw_output_contents(std::move(bytes));
    }
    return Status::OK;
  }

  ModelRepository& repository_;
  MetricsRegistry& metrics_;
  const std::atomic<bool>& ready_;
  SharedMemoryRegistry& shm_;
  StreamInfer streams_;
};

constexpr int kMaxIdleGrpcThreads = 1024;

class GrpcServer final : public GrpcEndpoint {
 public:
  GrpcServer(ModelRepository& repository, MetricsRegistry& metrics, const std::atomic<bool>& ready,
             SharedMemoryRegistry& shm)
      : service_(repository, metrics, ready, shm), health_(repository, ready) {}
  bool start(const std::string& host, int port) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(host + ":" + std::to_string(port), grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    builder.RegisterService(&health_);  // grpc.health.v1.Health (health_service.h)
    builder.SetMaxReceiveMessageSize(64 << 20);
    // A ModelInfer call holds one of the synchronous server's threads until its batch ran, and a
    // thread that finishes while more than MAX_POLLERS threads wait for calls exits: with
    // gRPC's default of 2, a batch of 64 answered at once ended 62 threads that the next 62
    // calls made again (557 threads made for 692 calls at 256 connections). Threads that stay
    // cost a sleeping stack each.
    builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, kMaxIdleGrpcThreads);
    server_ = builder.BuildAndStart();
    return server_ != nullptr && port_ > 0;
  }
  int port() const override { return port_; }
  void shutdown() override {
    health_.shutdown();  // Watch streams end now rather than at the deadline below
    service_.end_streams();  // so do ModelStreamInfer streams, once their requests are answered
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(30));
  }
  ~GrpcServer() override { shutdown(); }

 private:
  Service service_;
  HealthService health_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace

std::vector<std::string> grpc_service_methods() {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          inference::GRPCInferenceService::service_full_name());
  std::vector<std::string> names;
  for (int i = 0; service && i < service->method_count(); ++i) names.push_back(service->method(i)->name());
  return names;
}

std::unique_ptr<GrpcEndpoint> start_grpc_endpoint(ModelRepository& repository, MetricsRegistry& metrics,
                                                  const std::atomic<bool>& ready, SharedMemoryRegistry& shm,
                                                  const std::string& host, int port, std::string& why) {
  auto endpoint = std::make_unique<GrpcServer>(repository, metrics, ready, shm);
  if (!endpoint->start(host, port)) {
    why = "cannot listen for gRPC on " + host + ":" + std::to_string(port);
    return nullptr;
  }
  return endpoint;
}

}  // namespace convoy::serve
