#pragma once
// The KServe v2 gRPC endpoint (GRPCInferenceService) beside the HTTP one, on gRPC's own server.
// Built only with CONVOY_GRPC (Debian's libgrpc++-dev); without it start_grpc_endpoint says why.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "apps/serve/metrics.h"
#include "apps/serve/repository.h"
#include "apps/serve/shared_memory.h"

namespace convoy::serve {

class GrpcEndpoint {
 public:
  virtual ~GrpcEndpoint() = default;
  virtual int port() const = 0;
  // Stops taking calls; those in flight finish (bounded by gRPC's deadline).
  virtual void shutdown() = 0;
};

// Listens on host:port (0: any free port), with the shared-memory regions `shm` (the HTTP
// endpoint's too). Null with `why` set when gRPC is not built in or the port cannot be bound.
std::unique_ptr<GrpcEndpoint> start_grpc_endpoint(ModelRepository& repository, MetricsRegistry& metrics,
                                                  const std::atomic<bool>& ready, SharedMemoryRegistry& shm,
                                                  const std::string& host, int port, std::string& why);

// The methods of GRPCInferenceService as the compiled proto declares them, each of which has
// its row in kEndpoints (apps/serve/endpoints.h); empty without gRPC.
std::vector<std::string> grpc_service_methods();

}  // namespace convoy::serve
