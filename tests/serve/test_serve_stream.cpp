// End to end on the real server: gRPC ModelStreamInfer with Python's grpc (tests/serve/grpc_stream.py):
// every request answered once by its id, errors as error_message while the stream goes on, the
// answers the unary call's, a clean end after the client closes, a held-open stream ended by the
// server's stop.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/serve/serve_fixture.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using convoy::testing::http;
using convoy::testing::read_text;
using convoy::testing::run_command;
using convoy::testing::ServerProcess;
using ServeStreamE2E = convoy::testing::ServeTest;

bool have_python_grpc() { return run_command("/usr/bin/python3 -c 'import grpc, grpc_tools' 2>&1").status == 0; }

class StreamClient {
 public:
  StreamClient(const fs::path& dir, int n) : dir_(dir), n_(n) {
    std::vector<uint8_t> pixels(static_cast<size_t>(n) * 784);
    for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 29) % 256);
    convoy::testing::write_file(dir / "pixels.bin", pixels);
    fs::create_directories(dir / "stubs");
  }
  std::string command(int port, const std::string& c) const {
    return "/usr/bin/python3 " + std::string(CONVOY_SOURCE_DIR) + "/tests/serve/grpc_stream.py " + CONVOY_SOURCE_DIR +
           "/apps/serve/grpc " + (dir_ / "stubs").string() + " " + std::to_string(port) + " fm " +
           (dir_ / "pixels.bin").string() + " " + std::to_string(n_) + " " + c;
  }

 private:
  fs::path dir_;
  int n_;
};

TEST_F(ServeStreamE2E, EveryRequestIsAnsweredByItsIdAndErrorsDoNotEndTheStream) {
  if (!have_python_grpc()) GTEST_SKIP() << "Debian's python3-grpcio and python3-grpc-tools are not installed";
  add_model("fm", 1, checkpoint_a_, "max_batch_size: 4\ndynamic_batching: {max_queue_delay_microseconds: 2000}\n");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  if (server.grpc_port() < 0) GTEST_SKIP() << "convoy was built without gRPC: " << server.log();
  const StreamClient client(dir_.path(), 2);
  const auto r = run_command(client.command(server.grpc_port(), "answers") + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  const json got = json::parse(r.output);
  EXPECT_EQ(got.at("end"), "OK");  // the client closed its side: the stream ends cleanly
  const json& a = got.at("answers");
  EXPECT_EQ(got.at("order").size(), 7u) << got.dump();  // one answer each, none twice
  EXPECT_EQ(a.size(), 7u) << got.dump();
  for (const char* id : {"good-0", "good-1", "good-2"}) {
    ASSERT_TRUE(a.contains(id)) << got.dump();
    EXPECT_EQ(a.at(id).at("model"), "fm");
    EXPECT_EQ(a.at(id).at("outputs"), got.at("unary")) << id;  // the same answer as ModelInfer's
  }
  EXPECT_NE(a.at("bad-model").at("error").get<std::string>().find("nope"), std::string::npos) << got.dump();
  EXPECT_NE(a.at("bad-version").at("error").get<std::string>().find("bad version"), std::string::npos) << got.dump();
  EXPECT_NE(a.at("bad-shape").at("error").get<std::string>().find("shape"), std::string::npos) << got.dump();
  EXPECT_NE(a.at("both").at("error").get<std::string>().find("not both"), std::string::npos) << got.dump();

  const auto many = run_command(client.command(server.grpc_port(), "many") + " 2>&1");
  ASSERT_EQ(many.status, 0) << many.output;
  const json m = json::parse(many.output);
  EXPECT_EQ(m.at("end"), "OK");
  std::vector<std::string> ids = m.at("ids").get<std::vector<std::string>>();
  std::sort(ids.begin(), ids.end());
  std::vector<std::string> want;
  for (int i = 0; i < 64; ++i) want.push_back("r" + std::to_string(i));
  std::sort(want.begin(), want.end());
  EXPECT_EQ(ids, want);
  // The statistics count the streamed requests as the unary ones: 3 + 64 + 1 succeeded, 4 refused
  // before they reached the model are not the model's.
  const json stats = json::parse(http("GET", server.url("/v2/models/fm/stats"), "", dir_.path()).body);
  EXPECT_EQ(stats.at("model_stats").at(0).at("inference_stats").at("success").at("count"), 68) << stats.dump();
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST_F(ServeStreamE2E, AStreamHeldOpenEndsWhenTheServerStops) {
  if (!have_python_grpc()) GTEST_SKIP() << "Debian's python3-grpcio and python3-grpc-tools are not installed";
  add_model("fm", 1, checkpoint_a_, "max_batch_size: 4\n");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  if (server.grpc_port() < 0) GTEST_SKIP() << "convoy was built without gRPC: " << server.log();
  const StreamClient client(dir_.path(), 1);
  const fs::path out = dir_ / "held.txt";
  std::thread holder([&] { run_command(client.command(server.grpc_port(), "held-open") + " > " + out.string() + " 2>&1"); });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (read_text(out).find("answered\n") == std::string::npos && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto t0 = std::chrono::steady_clock::now();
  const int status = server.stop(SIGTERM, std::chrono::seconds(60));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  holder.join();
  EXPECT_EQ(status, 0) << server.log();
  EXPECT_LT(seconds, 10.0) << server.log();  // not gRPC's 30 s shutdown deadline
  EXPECT_EQ(read_text(out), "answered\nend UNAVAILABLE\n") << server.log();
}

}  // namespace
