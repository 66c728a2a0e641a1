// A build without gRPC (CONVOY_GRPC=OFF, or AUTO without libgrpc++-dev): HTTP only.
#include "apps/serve/grpc_endpoint.h"

namespace convoy::serve {

std::unique_ptr<GrpcEndpoint> start_grpc_endpoint(ModelRepository&, MetricsRegistry&, const std::atomic<bool>&,
                                                  SharedMemoryRegistry&, const std::string&, int, std::string& why) {
  why = "gRPC is not built in (configure with -DCONVOY_GRPC=ON and libgrpc++-dev)";
  return nullptr;
}

std::vector<std::string> grpc_service_methods() { return {}; }

}  // namespace convoy::serve
