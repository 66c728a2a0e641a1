#pragma once
// grpc.health.v1.Health on convoy serve's gRPC port. Service "" (and the KServe service's own
// name, inference.GRPCInferenceService) is the server: SERVING once ready, NOT_SERVING while it
// starts or stops. A model's name is that model: SERVING while a version is ready, NOT_SERVING
// while loaded with none ready. Other names are unknown: NOT_FOUND from Check, SERVICE_UNKNOWN
// from Watch.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "apps/serve/repository.h"
#include "health.grpc.pb.h"

namespace convoy::serve {

class HealthService final : public grpc::health::v1::Health::Service {
 public:
  using Response = grpc::health::v1::HealthCheckResponse;
  using Request = grpc::health::v1::HealthCheckRequest;

  HealthService(ModelRepository& repository, const std::atomic<bool>& ready)
      : repository_(repository), ready_(ready) {}

  grpc::Status Check(grpc::ServerContext* context, const Request* request, Response* response) override;
  grpc::Status Watch(grpc::ServerContext* context, const Request* request,
                     grpc::ServerWriter<Response>* writer) override;

  // From now on everything is NOT_SERVING, and every Watch sends that and ends within a bound,
  // so that none holds up the gRPC server's shutdown. Call before grpc::Server::Shutdown.
  void shutdown();

 private:
  // The status of `service`; nullopt when unknown.
  std::optional<Response::ServingStatus> status_of(const std::string& service) const;

  ModelRepository& repository_;
  const std::atomic<bool>& ready_;
  mutable std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
};

}  // namespace convoy::serve
