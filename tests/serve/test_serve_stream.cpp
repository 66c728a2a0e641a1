// End to end on the real server: gRPC ModelStreamInfer with Python's grpc (tests/serve/grpc_stream.py):
// every request answered once by its id, errors as error_message while the stream goes on, the
// answers the unary call's, a clean end after the client closes, a held-open stream ended by the
// server's stop; timestamp traces of HTTP and gRPC requests in the trace file; the log's settings
// changed while serving acting on what the server writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
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

// Every request traced (rate 1) on both protocols: Triton's records, the timestamps in order.
TEST_F(ServeStreamE2E, TimestampTracesOfHttpAndGrpcRequests) {
  add_model("fm", 1, checkpoint_a_, "max_batch_size: 4\n");
  const fs::path trace = dir_ / "trace.json";
  ServerProcess server(repo_arg() + " --trace-config level=TIMESTAMPS --trace-config rate=1 --trace-config triton,file=" +
                           trace.string(),
                       dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  const json request = {{"id", "h1"},
                        {"inputs", {{{"name", "input"}, {"shape", {1, 1, 28, 28}}, {"datatype", "UINT8"},
                                     {"data", std::vector<int>(784, 7)}}}}};
  ASSERT_EQ(post_json(server, "/v2/models/fm/infer", request).status, 200);
  json no_id = request;
  no_id.erase("id");
  ASSERT_EQ(post_json(server, "/v2/models/fm/infer", no_id).status, 200);
  int grpc_requests = 0;
  if (server.grpc_port() >= 0 && have_python_grpc()) {
    const auto r = run_command(StreamClient(dir_.path(), 1).command(server.grpc_port(), "answers") + " 2>&1");
    ASSERT_EQ(r.status, 0) << r.output;
    grpc_requests = 4;  // good-0, -1, -2 and the unary one; the others were refused before the model
  }
  const json settings = json::parse(http("GET", server.url("/v2/trace/setting"), "", dir_.path()).body);
  EXPECT_EQ(settings.at("trace_level"), json::array({"TIMESTAMPS"}));
  EXPECT_EQ(settings.at("trace_file"), trace.string());
  EXPECT_EQ(server.stop(), 0) << server.log();

  const json records = json::parse(read_text(trace));  // written at exit (log_frequency 0), as Triton
  std::map<int64_t, json> heads;
  std::map<int64_t, std::vector<std::pair<std::string, int64_t>>> stamps;
  for (const json& r : records) {
    if (r.contains("model_name"))
      heads[r.at("id")] = r;
    else
      stamps[r.at("id")].emplace_back(r.at("timestamps").at(0).at("name"), r.at("timestamps").at(0).at("ns"));
  }
  ASSERT_EQ(heads.size(), static_cast<size_t>(2 + grpc_requests)) << records.dump();
  std::set<std::string> request_ids;
  for (const auto& [id, head] : heads) {
    EXPECT_EQ(head.at("model_name"), "fm");
    EXPECT_EQ(head.at("model_version"), 1);
    if (head.contains("request_id")) request_ids.insert(head.at("request_id"));
    const auto& s = stamps[id];
    ASSERT_EQ(s.size(), 7u) << records.dump();
    const std::vector<std::string> names = {"REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END",
                                            "COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END"};
    for (size_t i = 0; i < s.size(); ++i) {
      EXPECT_EQ(s[i].first, names[i]);
      if (i > 0) EXPECT_LE(s[i - 1].second, s[i].second) << s[i].first;
    }
  }
  EXPECT_EQ(request_ids.count("h1"), 1u);
  if (grpc_requests) EXPECT_EQ(request_ids.count("good-1"), 1u);
}

TEST_F(ServeStreamE2E, LogSettingsChangedWhileServingActOnWhatItWrites) {
  add_model("fm", 1, checkpoint_a_, "max_batch_size: 4\n");
  fs::create_directories(repo() / "broken" / "1");
  convoy::testing::write_text_file(repo() / "broken" / "1" / "model.safetensors", "not a checkpoint");
  convoy::testing::write_text_file(repo() / "broken" / "config.yaml", "max_batch_size: 4\n");
  {  // errors off from the start: the broken model's failure is not written, its success is
    ServerProcess quiet(repo_arg() + " --log-error false", dir_.path());
    ASSERT_TRUE(quiet.started()) << quiet.log();
    EXPECT_EQ(quiet.log().find("UNAVAILABLE"), std::string::npos) << quiet.log();
    EXPECT_NE(quiet.log().find("'fm' version 1 READY"), std::string::npos) << quiet.log();
  }
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  EXPECT_NE(server.log().find("'broken' version 1 UNAVAILABLE"), std::string::npos) << server.log();
  auto post = [&](const std::string& body) {
    convoy::testing::write_text_file(dir_ / "logging.json", body);
    return http("POST", server.url("/v2/logging"), "--data-binary @" + (dir_ / "logging.json").string(), dir_.path());
  };
  ASSERT_EQ(http("GET", server.url("/v2/health/ready"), "", dir_.path()).status, 200);
  EXPECT_EQ(server.request_log(), "");  // verbose level 0: no request lines
  ASSERT_EQ(post(R"({"log_verbose_level": 1})").status, 200);
  ASSERT_EQ(http("GET", server.url("/v2/health/live"), "", dir_.path()).status, 200);
  const std::string lines = server.request_log();
  EXPECT_NE(lines.find("\"target\":\"/v2/health/live\""), std::string::npos) << lines;
  ASSERT_EQ(post(R"({"log_verbose_level": 0, "log_format": "ISO8601", "log_info": false})").status, 200);
  ASSERT_EQ(http("GET", server.url("/v2/health/live"), "", dir_.path()).status, 200);
  EXPECT_EQ(server.request_log(), lines);  // no new line
  const std::string before_stop = server.log();
  EXPECT_EQ(server.stop(), 0);
  const std::string after = server.log().substr(before_stop.size());
  // The stop's lines: the HTTP server's (std::cerr, a warning) headed in ISO8601; info ("stopped") off.
  EXPECT_TRUE(std::regex_search(after, std::regex("^[0-9-]+T[0-9:]+Z W [0-9]+ convoy\\] convoy serve: signal 15")))
      << after;
  EXPECT_EQ(after.find("convoy serve: stopped"), std::string::npos) << after;
}

}  // namespace
