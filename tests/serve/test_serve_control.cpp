// `convoy serve` under control and load: explicit load/unload, repository polling, a full
// queue answered with 503 at once, request timeouts, dynamic batching, classify against
// `convoy infer`, metrics, and SIGTERM draining the requests in flight.
#include <gtest/gtest.h>

#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "datasets/dataset.h"
#include "datasets/image_codec.h"
#include "engine/bundle/run_checkpoint.h"
#include "tests/serve/serve_fixture.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using convoy::testing::http;
using convoy::testing::run_command;
using convoy::testing::ServerProcess;
using ServeControlE2E = convoy::testing::ServeTest;

const json kGrey = {{"inputs", {{{"name", "input"}, {"shape", {1, 1, 28, 28}}, {"datatype", "UINT8"},
                                 {"data", std::vector<int>(784, 100)}}}}};

// One request body for the slow model (1, 3, 128, 128) UINT8, with extra top-level fields.
json slow_request(const json& parameters = json::object()) {
  json r = {{"inputs", {{{"name", "input"}, {"shape", {1, 3, 128, 128}}, {"datatype", "UINT8"},
                         {"data", std::vector<int>(3 * 128 * 128, 50)}}}}};
  if (!parameters.empty()) r["parameters"] = parameters;
  return r;
}

// `count` POSTs of `body_file` at once from one curl (-Z), one "status seconds" pair each.
std::vector<std::pair<int, double>> parallel_posts(const std::string& url, const fs::path& body_file, int count) {
  std::string command = "curl -s --no-progress-meter -Z --parallel-immediate --parallel-max 64 --max-time 60 -w '%{http_code} %{time_total}\\n'"
                        " --data-binary @" + body_file.string();
  for (int i = 0; i < count; ++i) command += " -o /dev/null '" + url + "'";
  const auto r = run_command(command);
  std::vector<std::pair<int, double>> out;
  std::istringstream lines(r.output);
  int status = 0;
  double seconds = 0;
  while (lines >> status >> seconds) out.emplace_back(status, seconds);
  return out;
}

// The value of one metric line, e.g. nv_inference_count{model="fm",version="1"}; -1 if absent.
double metric(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

std::string scrape(const ServerProcess& s, const fs::path& scratch) {
  return http("GET", "http://127.0.0.1:" + std::to_string(s.metrics_port()) + "/metrics", "", scratch).body;
}

TEST_F(ServeControlE2E, ExplicitControlLoadsAndUnloadsThroughTheApi) {
  add_model("a", 1, checkpoint_a_, "");
  add_model("b", 1, checkpoint_b_, "");
  ServerProcess server(repo_arg() + " --model-control explicit --load-model a", dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  EXPECT_EQ(http("GET", server.url("/v2/models/a/ready"), "", dir_.path()).status, 200);
  EXPECT_EQ(http("GET", server.url("/v2/models/b/ready"), "", dir_.path()).status, 404);  // not loaded
  EXPECT_EQ(post_json(server, "/v2/models/b/infer", kGrey).status, 404);
  EXPECT_EQ(http("POST", server.url("/v2/repository/models/b/load"), "", dir_.path()).status, 200);
  EXPECT_EQ(post_json(server, "/v2/models/b/infer", kGrey).status, 200);
  EXPECT_EQ(http("POST", server.url("/v2/repository/models/a/unload"), "", dir_.path()).status, 200);
  EXPECT_EQ(post_json(server, "/v2/models/a/infer", kGrey).status, 404);
  const auto index = http("POST", server.url("/v2/repository/index"), "", dir_.path());
  EXPECT_NE(index.body.find(R"({"name":"a","reason":"unloaded","state":"UNAVAILABLE"})"), std::string::npos) << index.body;
  const auto missing = http("POST", server.url("/v2/repository/models/zzz/load"), "", dir_.path());
  EXPECT_EQ(missing.status, 400);
  EXPECT_NE(missing.body.find("no model folder 'zzz'"), std::string::npos) << missing.body;
  EXPECT_EQ(server.stop(), 0);

  // Without explicit control the API refuses, as Triton's does.
  ServerProcess none(repo_arg(), dir_.path());
  ASSERT_TRUE(none.started()) << none.log();
  const auto refused = http("POST", none.url("/v2/repository/models/a/unload"), "", dir_.path());
  EXPECT_EQ(refused.status, 400);
  EXPECT_NE(refused.body.find("--model-control explicit"), std::string::npos) << refused.body;
  EXPECT_EQ(post_json(none, "/v2/models/a/infer", kGrey).status, 200);
}

TEST_F(ServeControlE2E, PollControlFollowsTheRepositoryFolder) {
  add_model("a", 1, checkpoint_a_, "");
  ServerProcess server(repo_arg() + " --model-control poll --repository-poll-secs 1", dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  add_model("b", 1, checkpoint_b_, "");
  fs::remove_all(repo() / "a");
  auto ready = [&](const std::string& m) { return http("GET", server.url("/v2/models/" + m + "/ready"), "", dir_.path()).status; };
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until && (ready("b") != 200 || ready("a") != 404))
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(ready("b"), 200) << server.log();
  EXPECT_EQ(ready("a"), 404) << server.log();  // its folder is gone: unknown
  EXPECT_EQ(server.stop(), 0);
}

TEST_F(ServeControlE2E, AFullQueueGets503AtOnceAndAnExpiredRequestTimesOut) {
  convoy::testing::write_slow_checkpoint(repo() / "slow/1/model.safetensors");
  convoy::testing::write_text_file(repo() / "slow/config.yaml",
                                   "max_batch_size: 1\ndevice: cpu\ndynamic_batching: {max_queue_size: 2}\n");
  convoy::testing::write_slow_checkpoint(repo() / "roomy/1/model.safetensors");
  convoy::testing::write_text_file(repo() / "roomy/config.yaml", "max_batch_size: 1\ndevice: cpu\ndynamic_batching: {}\n");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  convoy::testing::write_text_file(dir_ / "slow.json", slow_request().dump());
  const auto results = parallel_posts(server.url("/v2/models/slow/infer"), dir_ / "slow.json", 16);
  ASSERT_EQ(results.size(), 16u);
  int ok = 0, full = 0;
  double slowest_full = 0, slowest_ok = 0;
  for (const auto& [status, seconds] : results) {
    EXPECT_TRUE(status == 200 || status == 503) << status;
    if (status == 200) ok++, slowest_ok = std::max(slowest_ok, seconds);
    if (status == 503) full++, slowest_full = std::max(slowest_full, seconds);
  }
  // One running and two queued at most at any time: most of sixteen at once are refused, and a
  // refusal never waits for the model.
  EXPECT_GE(ok, 1);
  EXPECT_GE(full, 5);
  EXPECT_LT(slowest_full, slowest_ok);
  const std::string metrics = scrape(server, dir_.path());
  EXPECT_EQ(metric(metrics, R"(nv_inference_request_failure{model="slow",version="1"})"), full) << metrics;
  EXPECT_EQ(metric(metrics, R"(nv_inference_request_success{model="slow",version="1"})"), ok) << metrics;

  // A request with a 1 us timeout queued behind others fails with 504 (however fast the host
  // runs the model: its wait in the queue is longer than that); they succeed.
  std::vector<std::pair<int, double>> before;
  std::thread clients([&] { before = parallel_posts(server.url("/v2/models/roomy/infer"), dir_ / "slow.json", 3); });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until &&
         metric(scrape(server, dir_.path()), R"(nv_inference_pending_request_count{model="roomy",version="1"})") < 2)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto late = post_json(server, "/v2/models/roomy/infer", slow_request({{"timeout", 1}}));
  clients.join();
  EXPECT_EQ(late.status, 504) << late.body;
  EXPECT_NE(late.body.find("timed out"), std::string::npos) << late.body;
  ASSERT_EQ(before.size(), 3u);
  for (const auto& [status, seconds] : before) EXPECT_EQ(status, 200);
  EXPECT_EQ(server.stop(), 0);
}

TEST_F(ServeControlE2E, DynamicBatchingMergesConcurrentRequests) {
  add_model("fm", 1, checkpoint_a_,
            "max_batch_size: 8\ndynamic_batching: {max_queue_delay_microseconds: 300000, preferred_batch_size: [8]}\n");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  convoy::testing::write_text_file(dir_ / "grey.json", kGrey.dump());
  const auto results = parallel_posts(server.url("/v2/models/fm/infer"), dir_ / "grey.json", 8);
  ASSERT_EQ(results.size(), 8u);
  for (const auto& [status, seconds] : results) EXPECT_EQ(status, 200);
  const std::string metrics = scrape(server, dir_.path());
  EXPECT_EQ(metric(metrics, R"(nv_inference_count{model="fm",version="1"})"), 8) << metrics;
  EXPECT_EQ(metric(metrics, R"(nv_inference_request_success{model="fm",version="1"})"), 8) << metrics;
  EXPECT_LT(metric(metrics, R"(nv_inference_exec_count{model="fm",version="1"})"), 8) << metrics;
  EXPECT_GT(metric(metrics, R"(nv_inference_compute_infer_duration_us{model="fm",version="1"})"), 0) << metrics;
  EXPECT_GT(metric(metrics, R"(convoy_model_memory_bytes{model="fm",version="1"})"), 1e6) << metrics;
}

TEST_F(ServeControlE2E, ClassifyGivesConvoyInfersTop1ForAFashionMnistPng) {
  add_model("fm", 1, checkpoint_a_, "");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  convoy::DatasetSpec spec;
  const auto test = convoy::load_dataset(spec, "test", 8);
  convoy::Preprocess p;  // 1 x 28 x 28, as stored
  int compared = 0;
  for (int64_t i = 0; i < test->size(); ++i) {
    std::vector<uint8_t> pixels(784);
    test->load(i, p, convoy::SampleMode::eval, 0, pixels.data());
    const fs::path png = dir_ / ("image" + std::to_string(i) + ".png");
    convoy::testing::write_file(png, convoy::encode_png(pixels.data(), 28, 28, 1));
    const auto infer = run_command(std::string(CONVOY_BINARY) + " infer --device cpu -k 1 --model " + checkpoint_a_ +
                                   " " + png.string() + " 2>&1");
    ASSERT_EQ(infer.status, 0) << infer.output;
    std::smatch m;
    const std::string line = infer.output;
    ASSERT_TRUE(std::regex_search(line, m, std::regex(": (.+) ([0-9.]+)\n"))) << infer.output;
    const auto r = http("POST", server.url("/v2/models/fm/classify?top_k=3"),
                        "--data-binary @" + png.string() + " -H 'Content-Type: image/png'", dir_.path());
    ASSERT_EQ(r.status, 200) << r.body;
    const json reply = json::parse(r.body);
    ASSERT_EQ(reply.at("top_k").size(), 3u);
    EXPECT_EQ(reply.at("top_k")[0].at("label"), m[1].str()) << r.body << " vs " << infer.output;
    EXPECT_NEAR(reply.at("top_k")[0].at("probability").get<double>(), std::stod(m[2]), 0.0006);
    compared++;
  }
  EXPECT_EQ(compared, 8);
}

TEST_F(ServeControlE2E, SigtermFinishesTheRequestsInFlightAndExitsZero) {
  convoy::testing::write_slow_checkpoint(repo() / "slow/1/model.safetensors");
  convoy::testing::write_text_file(repo() / "slow/config.yaml", "max_batch_size: 1\ndevice: cpu\ndynamic_batching: {}\n");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  convoy::testing::write_text_file(dir_ / "slow.json", slow_request().dump());
  std::vector<std::pair<int, double>> results;
  std::thread clients([&] { results = parallel_posts(server.url("/v2/models/slow/infer"), dir_ / "slow.json", 3); });
  // SIGTERM once two of them wait in the queue behind a running one.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until &&
         metric(scrape(server, dir_.path()), R"(nv_inference_pending_request_count{model="slow",version="1"})") < 2)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
  clients.join();
  ASSERT_EQ(results.size(), 3u);
  for (const auto& [status, seconds] : results) EXPECT_EQ(status, 200);
  EXPECT_NE(server.log().find("finishing the ones in flight"), std::string::npos) << server.log();
}

}  // namespace

namespace {

TEST_F(ServeControlE2E, GrpcClientGetsTheSameAnswersAsHttp) {
  if (run_command("/usr/bin/python3 -c 'import grpc, grpc_tools' 2>&1").status != 0)
    GTEST_SKIP() << "Debian's python3-grpcio and python3-grpc-tools are not installed";
  add_model("fm", 1, checkpoint_a_, "max_batch_size: 4\n");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  if (server.grpc_port() < 0) GTEST_SKIP() << "convoy was built without gRPC: " << server.log();
  const int n = 2;
  std::vector<uint8_t> pixels(n * 784);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 37) % 256);
  convoy::testing::write_file(dir_ / "pixels.bin", pixels);
  fs::create_directories(dir_ / "stubs");
  const auto r = run_command("/usr/bin/python3 " + std::string(CONVOY_SOURCE_DIR) + "/tests/serve/grpc_client.py " +
                             CONVOY_SOURCE_DIR + "/apps/serve/grpc " + (dir_ / "stubs").string() + " " +
                             std::to_string(server.grpc_port()) + " " + (dir_ / "pixels.bin").string() + " " +
                             std::to_string(n) + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  const json got = json::parse(r.output);
  EXPECT_TRUE(got.at("live").get<bool>());
  EXPECT_TRUE(got.at("ready").get<bool>());
  EXPECT_EQ(got.at("server"), "convoy");
  EXPECT_EQ(got.at("input_shape"), json::array({-1, 1, 28, 28}));
  EXPECT_TRUE(got.at("model_ready").get<bool>());
  EXPECT_EQ(got.at("index"), json::parse(R"([["fm", "1", "READY"]])"));
  EXPECT_EQ(got.at("raw").at("id"), "g1");
  EXPECT_EQ(got.at("raw").at("version"), "1");
  // The HTTP endpoint's answer for the same pixels.
  const json request = {{"inputs", {{{"name", "input"}, {"shape", {n, 1, 28, 28}}, {"datatype", "UINT8"}, {"data", pixels}}}}};
  const auto h = post_json(server, "/v2/models/fm/infer", request);
  ASSERT_EQ(h.status, 200) << h.body;
  const json http_reply = json::parse(h.body);  // kept: a range-for over a temporary's member dangles
  for (const json& o : http_reply.at("outputs")) {
    const auto want = o.at("data").get<std::vector<float>>();
    ASSERT_EQ(want.size(), n * 10u);
    EXPECT_EQ(got.at("raw").at("outputs").at(o.at("name").get<std::string>()).get<std::vector<float>>(), want);
    EXPECT_EQ(got.at("contents").at("outputs").at(o.at("name").get<std::string>()).get<std::vector<float>>(), want);
  }
  EXPECT_EQ(got.at("unknown_model").get<std::string>().rfind("NOT_FOUND", 0), 0u) << got.dump();
  EXPECT_EQ(got.at("bad_shape").get<std::string>().rfind("INVALID_ARGUMENT", 0), 0u) << got.dump();
  EXPECT_NE(got.at("short_raw").get<std::string>().find("raw_input_contents holds 100 bytes"), std::string::npos)
      << got.dump();
  // Triton's rules: an input's data in both raw_input_contents and contents is refused; an unknown
  // model's readiness is NOT_FOUND (HTTP: 404).
  EXPECT_EQ(got.at("raw_and_contents").get<std::string>().rfind("INVALID_ARGUMENT", 0), 0u) << got.dump();
  EXPECT_NE(got.at("raw_and_contents").get<std::string>().find("not both"), std::string::npos) << got.dump();
  EXPECT_EQ(got.at("unknown_model_ready"), "NOT_FOUND") << got.dump();
  EXPECT_EQ(http("GET", server.url("/v2/models/nope/ready"), "", dir_.path()).status, 404);
  // parameters["timeout"] as over HTTP: negative refused, 2^63 - 1 served (cut to one hour).
  EXPECT_EQ(got.at("timeout_negative").get<std::string>().rfind("INVALID_ARGUMENT", 0), 0u) << got.dump();
  EXPECT_NE(got.at("timeout_negative").get<std::string>().find("timeout"), std::string::npos) << got.dump();
  EXPECT_EQ(got.at("timeout_max"), "OK") << got.dump();
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// GET .../config and gRPC ModelConfig give Triton's ModelConfig: the HTTP JSON parses strictly
// (json_format.Parse, unknown fields refused) into the message of model_config.proto, the gRPC
// response is that message, and the two are equal, with the values of the model's config.yaml
// and checkpoint.
TEST_F(ServeControlE2E, ModelConfigIsTritonsModelConfigOnBothProtocols) {
  if (run_command("/usr/bin/python3 -c 'import grpc_tools, google.protobuf' 2>&1").status != 0)
    GTEST_SKIP() << "Debian's python3-protobuf and python3-grpc-tools are not installed";
  add_model("fm", 1, checkpoint_a_,
            "max_batch_size: 4\ninstance_count: 2\ndevice: cpu\nversion_policy: {specific: [1]}\n"
            "dynamic_batching: {max_queue_delay_microseconds: 300, preferred_batch_size: [2, 4], max_queue_size: 16,"
            " default_timeout_microseconds: 5000000}\n");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  const std::vector<std::string> class_names =
      convoy::read_run_checkpoint(checkpoint_a_, convoy::CheckpointUse::inference).info.class_names;
  ASSERT_EQ(class_names.size(), 10u);

  // The HTTP text itself: Triton's JSON mapping, 64-bit integers as numbers and enums by name.
  const auto h = http("GET", server.url("/v2/models/fm/config"), "", dir_.path());
  ASSERT_EQ(h.status, 200) << h.body;
  const json doc = json::parse(h.body);
  EXPECT_EQ(doc.at("name"), "fm");
  EXPECT_EQ(doc.at("max_batch_size"), 4);
  EXPECT_EQ(doc.at("input").at(0).at("dims"), json::array({1, 28, 28})) << h.body;
  EXPECT_EQ(doc.at("input").at(0).at("data_type"), "TYPE_FP32");
  EXPECT_EQ(doc.at("input").at(0).at("format"), "FORMAT_NCHW");
  EXPECT_EQ(doc.at("dynamic_batching").at("max_queue_delay_microseconds"), 300) << h.body;
  EXPECT_EQ(doc.at("dynamic_batching").at("default_queue_policy").at("default_timeout_microseconds"), 5000000);
  EXPECT_EQ(doc.at("version_policy").at("specific").at("versions"), json::array({1}));
  EXPECT_EQ(http("GET", server.url("/v2/models/fm/versions/1/config"), "", dir_.path()).body, h.body);
  EXPECT_EQ(http("GET", server.url("/v2/models/nope/config"), "", dir_.path()).status, 404);

  fs::create_directories(dir_ / "stubs");
  const std::string grpc_port = server.grpc_port() < 0 ? "" : std::to_string(server.grpc_port());
  const auto r = run_command("/usr/bin/python3 " + std::string(CONVOY_SOURCE_DIR) + "/tests/serve/triton_config.py " +
                             CONVOY_SOURCE_DIR + "/apps/serve/grpc " + (dir_ / "stubs").string() + " " +
                             std::to_string(server.port()) + " fm " + grpc_port + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  const json got = json::parse(r.output);
  EXPECT_TRUE(got.at("strict").get<bool>()) << r.output;
  std::vector<std::string> protocols = {"http"};
  if (!grpc_port.empty()) {
    protocols.push_back("grpc");
    EXPECT_TRUE(got.at("same").get<bool>()) << r.output;
    EXPECT_EQ(got.at("unknown_model"), "NOT_FOUND") << r.output;
  }
  for (const std::string& p : protocols) {
    // As json_format.MessageToDict writes it: int64 values as strings.
    const json& c = got.at(p);
    EXPECT_EQ(c.at("name"), "fm") << p;
    EXPECT_EQ(c.at("platform"), "convoy") << p;
    EXPECT_EQ(c.at("max_batch_size"), 4) << p;
    ASSERT_EQ(c.at("input").size(), 1u) << p;
    EXPECT_EQ(c.at("input").at(0).at("name"), "input") << p;
    EXPECT_EQ(c.at("input").at(0).at("data_type"), "TYPE_FP32") << p;
    EXPECT_EQ(c.at("input").at(0).at("format"), "FORMAT_NCHW") << p;
    EXPECT_EQ(c.at("input").at(0).at("dims"), json::array({"1", "28", "28"})) << p;
    ASSERT_EQ(c.at("output").size(), 2u) << p;
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(c.at("output").at(i).at("name"), i == 0 ? "logits" : "probabilities") << p;
      EXPECT_EQ(c.at("output").at(i).at("data_type"), "TYPE_FP32") << p;
      EXPECT_EQ(c.at("output").at(i).at("dims"), json::array({"10"})) << p;
    }
    ASSERT_EQ(c.at("instance_group").size(), 1u) << p;
    EXPECT_EQ(c.at("instance_group").at(0).at("kind"), "KIND_CPU") << p;
    EXPECT_EQ(c.at("instance_group").at(0).at("count"), 2) << p;
    EXPECT_EQ(c.at("version_policy").at("specific").at("versions"), json::array({"1"})) << p;
    const json& d = c.at("dynamic_batching");
    EXPECT_EQ(d.at("preferred_batch_size"), json::array({2, 4})) << p;
    EXPECT_EQ(d.at("max_queue_delay_microseconds"), "300") << p;
    EXPECT_EQ(d.at("default_queue_policy").at("max_queue_size"), 16) << p;
    EXPECT_EQ(d.at("default_queue_policy").at("default_timeout_microseconds"), "5000000") << p;
    const json& params = c.at("parameters");
    EXPECT_EQ(json::parse(params.at("class_names").at("string_value").get<std::string>()), json(class_names)) << p;
    EXPECT_EQ(params.at("device").at("string_value"), "cpu") << p;
    EXPECT_EQ(json::parse(params.at("preprocessing").at("string_value").get<std::string>()).at("height"), 28) << p;
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace

namespace {

// wrk (Debian's) for one second at 1, 16 and 256 connections: every answer a 200, no socket
// error, and the server's own count agrees. benchmarks/serve/load_test.sh is the long version.
TEST_F(ServeControlE2E, WrkAt1And16And256ConnectionsGetsOnly200s) {
  if (run_command("command -v wrk").status != 0) GTEST_SKIP() << "wrk is not installed (apt-get install wrk)";
  add_model("fm", 1, checkpoint_a_,
            "max_batch_size: 16\ndynamic_batching: {max_queue_delay_microseconds: 500, max_queue_size: 512}\n");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  const std::string header = json{{"inputs", {{{"name", "input"}, {"shape", {1, 1, 28, 28}}, {"datatype", "UINT8"},
                                               {"parameters", {{"binary_data_size", 784}}}}}}}.dump();
  convoy::testing::write_text_file(dir_ / "body.bin", header + std::string(784, '\x40'));
  double answered = 0;
  for (int connections : {1, 16, 256}) {
    const auto r = run_command("SERVE_BODY=" + (dir_ / "body.bin").string() + " SERVE_HEADER_LENGTH=" +
                               std::to_string(header.size()) + " timeout 60 wrk -t" + std::to_string(connections > 1 ? 2 : 1) + " -c" + std::to_string(connections) +
                               " -d1s --timeout 10s -s " + CONVOY_SOURCE_DIR + "/benchmarks/serve/post.lua " +
                               server.url("/v2/models/fm/infer") + " 2>&1");
    ASSERT_EQ(r.status, 0) << r.output;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.output, m, std::regex("SERVE requests=([0-9]+) .* non2xx=([0-9]+) errors=([0-9]+)")))
        << r.output;
    EXPECT_GT(std::stoi(m[1]), 0) << connections << " connections: " << r.output;
    EXPECT_EQ(std::stoi(m[2]), 0) << connections << " connections: " << r.output;
    EXPECT_EQ(std::stoi(m[3]), 0) << connections << " connections: " << r.output;
    answered += std::stod(m[1]);
  }
  EXPECT_EQ(http("GET", server.url("/v2/health/live"), "", dir_.path()).status, 200);
  const std::string metrics = scrape(server, dir_.path());
  EXPECT_GE(metric(metrics, R"(nv_inference_request_success{model="fm",version="1"})"), answered) << metrics;
  EXPECT_EQ(metric(metrics, R"(nv_inference_request_failure{model="fm",version="1"})"), 0) << metrics;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
