// gRPC's standard health service (grpc.health.v1.Health) on convoy serve's gRPC port, called by
// Python's grpc with stubs generated from apps/serve/grpc/health.proto: Check of the server, a
// model, a model with no version ready, an unknown service; a Watch that sees a model unloaded
// and loaded; a Watch of the server that sees it stop and does not hold the stop up.
#include <gtest/gtest.h>

#include <thread>

#include <nlohmann/json.hpp>

#include "tests/serve/serve_fixture.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using convoy::testing::read_text;
using convoy::testing::run_command;
using convoy::testing::ServerProcess;
using ServeHealthE2E = convoy::testing::ServeTest;

std::string health_client(const fs::path& stubs, int port, const std::string& args) {
  return "/usr/bin/python3 " + std::string(CONVOY_SOURCE_DIR) + "/tests/serve/grpc_health.py " + CONVOY_SOURCE_DIR +
         "/apps/serve/grpc " + stubs.string() + " " + std::to_string(port) + " " + args;
}

bool have_python_grpc() { return run_command("/usr/bin/python3 -c 'import grpc, grpc_tools' 2>&1").status == 0; }

TEST_F(ServeHealthE2E, CheckAndWatchFollowTheModels) {
  if (!have_python_grpc()) GTEST_SKIP() << "Debian's python3-grpcio and python3-grpc-tools are not installed";
  add_model("fm", 1, checkpoint_a_, "max_batch_size: 4\n");
  // A model whose only version cannot load: in the repository, never ready.
  fs::create_directories(repo() / "broken" / "1");
  convoy::testing::write_text_file(repo() / "broken" / "1" / "model.safetensors", "not a checkpoint");
  convoy::testing::write_text_file(repo() / "broken" / "config.yaml", "max_batch_size: 4\n");
  ServerProcess server(repo_arg() + " --model-control explicit --load-model fm --load-model broken", dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  if (server.grpc_port() < 0) GTEST_SKIP() << "convoy was built without gRPC: " << server.log();
  fs::create_directories(dir_ / "stubs");
  const auto r = run_command(health_client(dir_ / "stubs", server.grpc_port(), "checks fm broken 2>&1"));
  ASSERT_EQ(r.status, 0) << r.output << server.log();
  const json got = json::parse(r.output);
  EXPECT_EQ(got.at("check"), json::parse(R"({"": "SERVING", "inference.GRPCInferenceService": "SERVING",
                                             "fm": "SERVING", "broken": "NOT_SERVING", "nope": "NOT_FOUND"})"));
  EXPECT_EQ(got.at("watch_unknown"), "SERVICE_UNKNOWN");
  // Unloading takes the model out of the repository: unknown until it is loaded again.
  EXPECT_EQ(got.at("watch_model"), json::parse(R"(["SERVING", "SERVICE_UNKNOWN", "SERVING"])"));
  EXPECT_EQ(got.at("check_unloaded"), "NOT_FOUND");
  EXPECT_EQ(got.at("check_reloaded"), "SERVING");
}

TEST_F(ServeHealthE2E, AWatchSeesTheServerStopAndDoesNotHoldItUp) {
  if (!have_python_grpc()) GTEST_SKIP() << "Debian's python3-grpcio and python3-grpc-tools are not installed";
  add_model("fm", 1, checkpoint_a_, "max_batch_size: 4\n");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  if (server.grpc_port() < 0) GTEST_SKIP() << "convoy was built without gRPC: " << server.log();
  fs::create_directories(dir_ / "stubs");
  const fs::path out = dir_ / "watch.txt";
  std::thread watcher([&] {
    run_command(health_client(dir_ / "stubs", server.grpc_port(), "watch-server > " + out.string() + " 2>&1"));
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (read_text(out).find("SERVING\n") == std::string::npos && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::string first = read_text(out);
  // Stop: the open Watch must end with the server, well before gRPC's 30 s shutdown deadline.
  const auto t0 = std::chrono::steady_clock::now();
  const int status = server.stop(SIGTERM, std::chrono::seconds(60));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  watcher.join();
  EXPECT_EQ(first, "SERVING\n");
  EXPECT_EQ(status, 0) << server.log();
  EXPECT_LT(seconds, 10.0) << server.log();
  EXPECT_EQ(read_text(out), "SERVING\nNOT_SERVING\nend UNAVAILABLE\n") << server.log();
}

}  // namespace
