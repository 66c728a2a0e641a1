// Protocol conformance (issue 36, point 4): tests/serve/conformance.py drives every HTTP route and
// gRPC method of the real server with a valid call and with misuse, each against the status Triton
// gives. The routes and methods it must cover are read here from the server's own tables
// (kEndpoints, the compiled GRPCInferenceService), so that a route added without its cases fails.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "apps/serve/endpoints.h"
#include "apps/serve/grpc_endpoint.h"
#include "tests/serve/serve_fixture.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using convoy::testing::run_command;
using convoy::testing::ServerProcess;
using ServeConformanceE2E = convoy::testing::ServeTest;

TEST_F(ServeConformanceE2E, EveryRouteAndRpcAnswersValidCallsAndMisuseAsTritonDoes) {
  const bool grpc_built = !convoy::serve::grpc_service_methods().empty();
  if (grpc_built && run_command("/usr/bin/python3 -c 'import grpc, grpc_tools' 2>&1").status != 0)
    GTEST_SKIP() << "Debian's python3-grpcio and python3-grpc-tools are not installed";
  add_model("fm", 1, checkpoint_a_, "max_batch_size: 4\n");
  add_model("spare", 1, checkpoint_b_, "max_batch_size: 2\n");
  ServerProcess server(repo_arg() + " --model-control explicit --load-model fm --load-model spare", dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  ASSERT_EQ(server.grpc_port() >= 0, grpc_built) << server.log();
  fs::create_directories(dir_ / "stubs");
  const auto r = run_command("cd " + std::string(CONVOY_SOURCE_DIR) + "/tests/serve && /usr/bin/python3 conformance.py " +
                             CONVOY_SOURCE_DIR + "/apps/serve/grpc " + (dir_ / "stubs").string() + " " +
                             std::to_string(server.port()) + " " +
                             (grpc_built ? std::to_string(server.grpc_port()) : std::string("-")) + " fm spare 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  const json got = json::parse(r.output);

  std::map<std::string, std::set<std::string>> kinds;  // route: "valid", "misuse"
  for (const json& c : got.at("cases")) {
    EXPECT_EQ(c.at("got"), c.at("want")) << c.at("route").get<std::string>() << ": " << c.at("what").get<std::string>()
                                         << "\n  " << c.at("detail").get<std::string>();
    kinds[c.at("route")].insert(c.at("kind"));
  }
  auto covered = [&](const std::string& route) {
    EXPECT_EQ(kinds[route], (std::set<std::string>{"valid", "misuse"})) << route << " is not driven both ways";
  };
  for (const convoy::serve::Endpoint& e : convoy::serve::kEndpoints)
    if (!e.method.empty()) covered(std::string(e.method) + " " + std::string(e.path));
  for (const std::string& method : convoy::serve::grpc_service_methods()) covered("grpc " + method);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
