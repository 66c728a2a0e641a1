// The Router's dispatch through the table of endpoints (apps/serve/endpoints.h), on an empty
// repository: which path and method reach which endpoint, and the status and body of each
// refusal. The gRPC service's methods are the table's gRPC column.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "apps/serve/endpoints.h"
#include "apps/serve/grpc_endpoint.h"
#include "apps/serve/routes.h"
#include "tests/serve/router_fixture.h"

namespace {

using namespace convoy::serve;

using ServeRoutes = convoy::testing::RouterTest;

TEST_F(ServeRoutes, ServerEndpoints) {
  HttpReply r = call("GET", "/v2");
  EXPECT_EQ(r.status, 200u);
  EXPECT_NE(r.body.find("\"name\":\"convoy\""), std::string::npos) << r.body;
  // CUDA shared memory only where CUDA is built in and a GPU usable.
  const std::string cuda = cuda_shared_memory_unavailable_reason().empty() ? ",\"cuda_shared_memory\"" : "";
  EXPECT_NE(r.body.find("\"extensions\":[\"binary_tensor_data\",\"model_repository\",\"model_configuration\","
                        "\"classification\",\"statistics\",\"trace\",\"logging\",\"system_shared_memory\"" + cuda + "]"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(call("GET", "/v2/health/live").body, "{}");
  EXPECT_EQ(call("GET", "/v2//health//live/").status, 200u);  // empty segments are ignored
  EXPECT_EQ(call("GET", "/v2/health/ready").status, 200u);
  ready_ = false;
  r = call("GET", "/v2/health/ready");
  EXPECT_EQ(r.status, 503u);
  EXPECT_EQ(r.body, "{\"error\":\"not ready\"}");
  EXPECT_EQ(call("POST", "/v2/repository/index").body, "[]");
}

// Triton's statuses: an unknown path is a 404, another method on an endpoint's path a 405.
TEST_F(ServeRoutes, UnknownPathsAre404AndOtherMethods405) {
  HttpReply r = call("GET", "/metrics");
  EXPECT_EQ(r.status, 404u);
  EXPECT_EQ(r.body, "{\"error\":\"not found: /metrics\"}");
  r = call("POST", "/v2/health/live");
  EXPECT_EQ(r.status, 405u);
  EXPECT_EQ(r.body, "{\"error\":\"method POST is not allowed on /v2/health/live\"}");
  EXPECT_EQ(call("GET", "/v2/repository/index").status, 405u);
  EXPECT_EQ(call("DELETE", "/v2/logging").status, 405u);
  EXPECT_EQ(call("PUT", "/v2/models/m/trace/setting").status, 405u);
  EXPECT_EQ(call("GET", "/v2/models/m/versions").body, "{\"error\":\"no endpoint GET /v2/models/m/versions\"}");
  EXPECT_EQ(call("GET", "/v2/models/m/x/ready").status, 404u);
  EXPECT_EQ(call("GET", "/v2/health/other").status, 404u);
}

TEST_F(ServeRoutes, ModelPathsWithAndWithoutAVersion) {
  // An unknown model: 404 for metadata, config, ready and infer.
  for (const std::string base : {"/v2/models/m", "/v2/models/m/versions/3"}) {
    EXPECT_EQ(call("GET", base).status, 404u) << base;
    EXPECT_EQ(call("GET", base + "/config").status, 404u) << base;
    EXPECT_EQ(call("GET", base + "/ready").status, 404u) << base;
    EXPECT_EQ(call("GET", base + "/ready").body, "{\"error\":\"unknown model 'm'\"}") << base;
    EXPECT_EQ(call("POST", base + "/infer").status, 404u) << base;
    EXPECT_EQ(call("POST", base + "/classify").status, 404u) << base;
  }
  // A bad version is a 400 whatever follows it; "versions" alone is a model's name.
  EXPECT_EQ(call("GET", "/v2/models/m/versions/0").body, "{\"error\":\"bad version '0'\"}");
  EXPECT_EQ(call("POST", "/v2/models/m/versions/abc/x/y").body, "{\"error\":\"bad version 'abc'\"}");
  EXPECT_EQ(call("GET", "/v2/models/versions").status, 404u);
  HttpReply r = call("POST", "/v2/models/m/classify?top_k=0");
  EXPECT_EQ(r.status, 400u);
  EXPECT_EQ(r.body, "{\"error\":\"top_k must be a positive integer, got '0'\"}");
}

TEST_F(ServeRoutes, LoadAndUnloadOnlyUnderExplicitControl) {
  HttpReply r = call("POST", "/v2/repository/models/m/load");
  EXPECT_EQ(r.status, 400u);
  EXPECT_EQ(r.body, std::string("{\"error\":\"") + kExplicitControlOnly + "\"}");
  EXPECT_EQ(call("POST", "/v2/repository/models/m/unload").status, 400u);
  ModelRepository explicit_repository(dir_.path(), ModelControl::explicit_, metrics_, log_, convoy::EngineOptions{});
  Router router(explicit_repository, metrics_, ready_);
  r = call("POST", "/v2/repository/models/m/load", "", &router);  // no folder m: the repository's InputError
  EXPECT_EQ(r.status, 400u);
  EXPECT_EQ(r.body.find(kExplicitControlOnly), std::string::npos) << r.body;
}

TEST(ServeEndpoints, TheGrpcServiceHasARowForEachOfItsMethods) {
  const std::vector<std::string> methods = grpc_service_methods();
  if (methods.empty()) GTEST_SKIP() << "convoy was built without gRPC";
  for (const std::string& m : methods)
    EXPECT_EQ(std::count_if(std::begin(kEndpoints), std::end(kEndpoints),
                            [&](const Endpoint& e) { return e.grpc_method == m; }),
              1)
        << m;
  for (const Endpoint& e : kEndpoints) {
    if (!e.grpc_method.empty()) {
      EXPECT_NE(std::find(methods.begin(), methods.end(), e.grpc_method), methods.end()) << e.grpc_method;
    }
  }
}

}  // namespace
