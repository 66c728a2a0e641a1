// Watch polls the status instead of being told of changes: readiness lives in the repository and
// the server's ready flag, which know nothing of watchers, and a look every kWatchPoll costs a
// map lookup per watcher. The poll also bounds how long a Watch takes to see a cancel or a stop.
#include "apps/serve/grpc/health_service.h"

#include <chrono>

namespace convoy::serve {

namespace {

constexpr auto kWatchPoll = std::chrono::milliseconds(100);
constexpr const char* kInferenceService = "inference.GRPCInferenceService";

}  // namespace

std::optional<HealthService::Response::ServingStatus> HealthService::status_of(const std::string& service) const {
  bool stopping;
  {
    std::lock_guard lock(mutex_);
    stopping = stopping_;
  }
  if (service.empty() || service == kInferenceService)
    return ready_ && !stopping ? Response::SERVING : Response::NOT_SERVING;
  if (!repository_.has_model(service)) return std::nullopt;
  return !stopping && !repository_.ready_versions(service).empty() ? Response::SERVING : Response::NOT_SERVING;
}

grpc::Status HealthService::Check(grpc::ServerContext*, const Request* request, Response* response) {
  const auto status = status_of(request->service());
  if (!status) return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service '" + request->service() + "'");
  response->set_status(*status);
  return grpc::Status::OK;
}

grpc::Status HealthService::Watch(grpc::ServerContext* context, const Request* request,
                                  grpc::ServerWriter<Response>* writer) {
  std::optional<Response::ServingStatus> sent;
  while (true) {
    bool stopping;
    {
      std::lock_guard lock(mutex_);
      stopping = stopping_;
    }
    const Response::ServingStatus now = status_of(request->service()).value_or(Response::SERVICE_UNKNOWN);
    if (now != sent) {
      Response response;
      response.set_status(now);
      if (!writer->Write(response)) return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
      sent = now;
    }
    if (stopping) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "convoy serve is stopping");
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client");
    std::unique_lock lock(mutex_);
    stop_.wait_for(lock, kWatchPoll, [this] { return stopping_; });
  }
}

void HealthService::shutdown() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
}

}  // namespace convoy::serve
