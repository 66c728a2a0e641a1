// Triton's statistics and classification extensions of `convoy serve`: the parts on their own
// (top-k strings, the classification parameter, the statistics of an empty repository), and end
// to end on the real server: the statistics count the requests sent, per batch size, the same on
// HTTP, gRPC and /metrics; a classified output is the top k of the output itself, as JSON, binary
// and gRPC; a bad k is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "apps/serve/kserve_json.h"
#include "apps/serve/routes.h"
#include "apps/serve/served_model.h"
#include "engine/bundle/run_checkpoint.h"
#include "tests/serve/serve_fixture.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using convoy::testing::http;
using convoy::testing::run_command;
using convoy::testing::ServerProcess;
using ServeExtensionsE2E = convoy::testing::ServeTest;
using namespace convoy::serve;

// What the test expects of a classified row, written here from the values: the k highest, the
// lower index first among equals, as "value:index:label" with the value as std::to_string writes it.
std::vector<std::string> expected_top_k(const std::vector<float>& values, size_t classes, size_t k,
                                        const std::vector<std::string>& labels) {
  std::vector<std::string> out;
  for (size_t r = 0; r * classes < values.size(); ++r) {
    std::vector<size_t> order(classes);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return values[r * classes + a] > values[r * classes + b]; });
    for (size_t i = 0; i < k; ++i)
      out.push_back(std::to_string(values[r * classes + order[i]]) + ":" + std::to_string(order[i]) + ":" +
                    labels[order[i]]);
  }
  return out;
}

std::vector<std::string> split_bytes(std::string_view raw) {
  std::vector<std::string> out;
  while (raw.size() >= 4) {
    uint32_t n = 0;
    std::memcpy(&n, raw.data(), 4);
    out.emplace_back(raw.substr(4, n));
    raw.remove_prefix(4 + std::min<size_t>(n, raw.size() - 4));
  }
  return out;
}

const json* find_output(const json& reply, const std::string& name) {
  for (const json& o : reply.at("outputs"))
    if (o.at("name") == name) return &o;
  return nullptr;
}

// parameters.timeout (HTTP and gRPC alike): negative refused; any int64 gives a deadline without
// overflowing the clock, at most one hour away.
TEST(ServeRequestRanges, TimeoutsAreCheckedAndCutToAnHour) {
  EXPECT_THROW(check_timeout(-1), RequestError);
  EXPECT_EQ(check_timeout(0), 0);
  EXPECT_EQ(check_timeout(5), 5);
  EXPECT_EQ(check_timeout(std::numeric_limits<int64_t>::max()), kMaxTimeoutUs);
  const Clock::time_point now = Clock::now();
  EXPECT_EQ(deadline_after(now, 0), Clock::time_point::max());
  EXPECT_EQ(deadline_after(now, -3), Clock::time_point::max());
  EXPECT_EQ(deadline_after(now, 7), now + std::chrono::microseconds(7));
  EXPECT_EQ(deadline_after(now, std::numeric_limits<int64_t>::max()), now + std::chrono::hours(1));
}

TEST(ServeExtensions, TopKClassesAreTritonsValueIndexLabelStrings) {
  // Triton's document's example: [1, 5, 10, 4] top 2 is index 2 then 1.
  EXPECT_EQ(top_k_classes({1, 5, 10, 4}, 4, 2, {"w", "x", "y", "z"}),
            (std::vector<std::string>{"10.000000:2:y", "5.000000:1:x"}));
  EXPECT_EQ(top_k_classes({1, 5, 10, 4}, 4, 2, {}), (std::vector<std::string>{"10.000000:2", "5.000000:1"}));
  // Two rows, k of every class; equal values in index order.
  EXPECT_EQ(top_k_classes({0.25f, 0.5f, 0.25f, 3, 2, 1}, 3, 3, {"a", "b", "c"}),
            (std::vector<std::string>{"0.500000:1:b", "0.250000:0:a", "0.250000:2:c", "3.000000:0:a",
                                      "2.000000:1:b", "1.000000:2:c"}));
  EXPECT_EQ(split_bytes(serialize_bytes_elements({"ab", "", "cde"})), (std::vector<std::string>{"ab", "", "cde"}));
  EXPECT_EQ(serialize_bytes_elements({"ab"}), std::string("\x02\0\0\0ab", 6));
}

TEST(ServeExtensions, TheClassificationParameterIsACountOfTheModelsClasses) {
  const TensorSpec spec{{1, 2, 2}, 2, 4};
  auto parse = [&](const json& parameters) {
    const json body = {{"inputs", {{{"name", "input"}, {"shape", {1, 1, 2, 2}}, {"datatype", "FP32"}, {"data", {1, 2, 3, 4}}}}},
                       {"outputs", {{{"name", "probabilities"}, {"parameters", parameters}}, {{"name", "logits"}}}}};
    return parse_infer_request(body.dump(), std::nullopt, spec);
  };
  const InferRequest r = parse({{"classification", 3}, {"binary_data", true}});
  ASSERT_EQ(r.outputs.size(), 2u);
  EXPECT_EQ(r.outputs[0].classification, 3);
  EXPECT_TRUE(r.outputs[0].binary);
  EXPECT_EQ(r.outputs[1].classification, 0);
  EXPECT_EQ(parse({{"classification", 4}}).outputs[0].classification, 4);
  for (const json& bad : {json(0), json(-1), json(5), json("3"), json(2.5)}) {
    try {
      parse({{"classification", bad}});
      ADD_FAILURE() << "classification " << bad << " was taken";
    } catch (const RequestError& e) {
      EXPECT_EQ(e.status(), 400u);
      EXPECT_NE(std::string(e.what()).find("'probabilities'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("classification"), std::string::npos) << e.what();
    }
  }
  // The reply: BYTES (n, k), as JSON strings or as binary elements after the JSON.
  InferRequest two = parse({{"classification", 2}});
  const std::vector<float> probs = {0.1f, 0.6f, 0.2f, 0.1f}, logits = {1, 2, 3, 4};
  json reply = json::parse(make_infer_reply(two, "m", 1, logits, probs, 4, {"a", "b", "c", "d"}).body);
  EXPECT_EQ(*find_output(reply, "probabilities"),
            json::parse(R"({"name":"probabilities","datatype":"BYTES","shape":[1,2],)"
                        R"("data":["0.600000:1:b","0.200000:2:c"]})"));
  EXPECT_EQ(find_output(reply, "logits")->at("datatype"), "FP32");
  two.outputs[0].binary = true;
  const InferReplyBody binary = make_infer_reply(two, "m", 1, logits, probs, 4, {"a", "b", "c", "d"});
  ASSERT_TRUE(binary.header_length);
  reply = json::parse(binary.body.substr(0, *binary.header_length));
  const size_t size = find_output(reply, "probabilities")->at("parameters").at("binary_data_size");
  EXPECT_EQ(split_bytes(std::string_view(binary.body).substr(*binary.header_length, size)),
            (std::vector<std::string>{"0.600000:1:b", "0.200000:2:c"}));
}

TEST(ServeExtensions, StatisticsOfAnEmptyRepository) {
  convoy::testing::TempDir dir;
  MetricsRegistry metrics;
  std::ostringstream log;
  ModelRepository repository(dir.path(), ModelControl::none, metrics, log, convoy::EngineOptions{});
  std::atomic<bool> ready{true};
  Router router(repository, metrics, ready);
  auto get = [&](const std::string& target) {
    HttpReply out;
    out.status = 0;
    router.handle({"GET", target, {}, "", std::nullopt}, [&](HttpReply r) { out = std::move(r); });
    return out;
  };
  EXPECT_EQ(get("/v2/models/stats").status, 200u);
  EXPECT_EQ(get("/v2/models/stats").body, R"({"model_stats":[]})");
  EXPECT_EQ(get("/v2/models/m/stats").status, 404u);
  EXPECT_EQ(get("/v2/models/m/stats").body, R"({"error":"unknown model 'm'"})");
  EXPECT_EQ(get("/v2/models/m/versions/2/stats").status, 404u);
  EXPECT_EQ(get("/v2/models/m/versions/0/stats").status, 400u);
}

// The count and ns of a $duration_stat, as HTTP's JSON or gRPC's MessageToDict (strings, zeros left out) has them.
uint64_t count_of(const json& stat, const char* key = "count") {
  if (!stat.contains(key)) return 0;
  const json& v = stat.at(key);
  return v.is_string() ? std::stoull(v.get<std::string>()) : v.get<uint64_t>();
}
uint64_t field(const json& o, const char* key) { return count_of(o, key); }
uint64_t ns_of_stat(const json& o, const char* key) { return o.contains(key) ? count_of(o.at(key), "ns") : 0; }
uint64_t count_of_stat(const json& o, const char* key) { return o.contains(key) ? count_of(o.at(key)) : 0; }

// batch size -> executions (compute_infer's count), from a model_stat's batch_stats.
std::map<uint64_t, uint64_t> batch_counts(const json& model_stat) {
  std::map<uint64_t, uint64_t> out;
  if (!model_stat.contains("batch_stats")) return out;
  for (const json& b : model_stat.at("batch_stats")) {
    EXPECT_EQ(count_of_stat(b, "compute_input"), count_of_stat(b, "compute_infer")) << b;
    EXPECT_EQ(count_of_stat(b, "compute_output"), count_of_stat(b, "compute_infer")) << b;
    EXPECT_GT(ns_of_stat(b, "compute_infer"), 0u) << b;
    out[field(b, "batch_size")] = count_of_stat(b, "compute_infer");
  }
  return out;
}

double metric(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

uint64_t now_ms() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

json grey(int64_t n) {
  return {{"inputs", {{{"name", "input"}, {"shape", {n, 1, 28, 28}}, {"datatype", "UINT8"},
                       {"data", std::vector<int>(n * 784, 100)}}}}};
}

TEST_F(ServeExtensionsE2E, StatisticsCountTheRequestsPerBatchSizeAsMetricsDo) {
  add_model("fm", 1, checkpoint_a_, "max_batch_size: 4\ndevice: cpu\n");  // no dynamic batching: a batch per request
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  auto stats = [&](const std::string& path) {
    const auto r = http("GET", server.url(path), "", dir_.path());
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    return r.status == 200 ? json::parse(r.body) : json::object();
  };
  json before = stats("/v2/models/fm/stats").at("model_stats");
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].at("inference_count"), 0);
  EXPECT_EQ(before[0].at("last_inference"), 0);
  EXPECT_EQ(before[0].at("batch_stats"), json::array());

  const uint64_t t0 = now_ms();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(post_json(server, "/v2/models/fm/infer", grey(2)).status, 200);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(post_json(server, "/v2/models/fm/infer", grey(1)).status, 200);
  // One that fails in the model's instance: an encoded image that is not one.
  const std::string header = json({{"inputs", {{{"name", "input"}, {"shape", {1}}, {"datatype", "BYTES"},
                                                {"parameters", {{"binary_data_size", 9}}}}}}})
                                 .dump();
  convoy::testing::write_text_file(dir_ / "bad_image.bin", header + std::string("\x05\0\0\0hello", 9));
  const auto failed = http("POST", server.url("/v2/models/fm/infer"),
                           "--data-binary @" + (dir_ / "bad_image.bin").string() +
                               " -H 'Inference-Header-Content-Length: " + std::to_string(header.size()) + "'",
                           dir_.path());
  EXPECT_EQ(failed.status, 400) << failed.body;
  // Refused before the model: not an inference.
  EXPECT_EQ(post_json(server, "/v2/models/fm/infer", json{{"inputs", json::array()}}).status, 400);
  const uint64_t t1 = now_ms();

  const json all = stats("/v2/models/stats");
  ASSERT_EQ(all.at("model_stats").size(), 1u) << all;
  const json& s = all.at("model_stats")[0];
  EXPECT_EQ(s.at("name"), "fm");
  EXPECT_EQ(s.at("version"), "1");
  EXPECT_EQ(stats("/v2/models/fm/stats"), all);
  EXPECT_EQ(stats("/v2/models/fm/versions/1/stats"), all);
  EXPECT_EQ(field(s, "inference_count"), 8u) << s;
  EXPECT_EQ(field(s, "execution_count"), 5u) << s;
  EXPECT_GE(field(s, "last_inference"), t0) << s;
  EXPECT_LE(field(s, "last_inference"), t1) << s;
  const json& in = s.at("inference_stats");
  EXPECT_EQ(count_of_stat(in, "success"), 5u) << in;
  EXPECT_EQ(count_of_stat(in, "fail"), 1u) << in;
  EXPECT_GT(ns_of_stat(in, "fail"), 0u) << in;
  for (const char* phase : {"queue", "compute_input", "compute_infer", "compute_output"})
    EXPECT_EQ(count_of_stat(in, phase), 5u) << phase << ": " << in;
  EXPECT_GT(ns_of_stat(in, "compute_infer"), 0u) << in;
  // A request's time from receipt to answer holds its queueing and its batch's phases.
  EXPECT_GE(ns_of_stat(in, "success"), ns_of_stat(in, "queue") + ns_of_stat(in, "compute_input") +
                                           ns_of_stat(in, "compute_infer") + ns_of_stat(in, "compute_output"))
      << in;
  EXPECT_EQ(batch_counts(s), (std::map<uint64_t, uint64_t>{{1, 2}, {2, 3}})) << s;

  // /metrics reports the same counters.
  const std::string metrics =
      http("GET", "http://127.0.0.1:" + std::to_string(server.metrics_port()) + "/metrics", "", dir_.path()).body;
  EXPECT_EQ(metric(metrics, R"(nv_inference_count{model="fm",version="1"})"), 8) << metrics;
  EXPECT_EQ(metric(metrics, R"(nv_inference_exec_count{model="fm",version="1"})"), 5) << metrics;
  EXPECT_EQ(metric(metrics, R"(nv_inference_request_success{model="fm",version="1"})"), 5) << metrics;
  EXPECT_EQ(metric(metrics, R"(nv_inference_request_failure{model="fm",version="1"})"), 1) << metrics;
  EXPECT_EQ(metric(metrics, R"(nv_inference_compute_infer_duration_us{model="fm",version="1"})"),
            static_cast<double>(ns_of_stat(in, "compute_infer") / 1000))
      << metrics;

  EXPECT_EQ(http("GET", server.url("/v2/models/fm/versions/2/stats"), "", dir_.path()).status, 404);
  EXPECT_EQ(http("GET", server.url("/v2/models/nope/stats"), "", dir_.path()).status, 404);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST_F(ServeExtensionsE2E, ClassificationIsTheTopKOfTheOutputAsJsonBinaryAndGrpc) {
  add_model("fm", 1, checkpoint_a_, "max_batch_size: 4\ndevice: cpu\n");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  const std::vector<std::string> labels =
      convoy::read_run_checkpoint(checkpoint_a_, convoy::CheckpointUse::inference).info.class_names;
  ASSERT_EQ(labels.size(), 10u);
  const int64_t n = 2;
  std::mt19937 rng(11);
  std::vector<uint8_t> pixels(n * 784);
  for (uint8_t& p : pixels) p = static_cast<uint8_t>(rng() % 256);
  const json input = {{{"name", "input"}, {"shape", {n, 1, 28, 28}}, {"datatype", "UINT8"}, {"data", pixels}}};

  // The outputs themselves; each request below is a batch of its own, so the same computation.
  const auto plain = post_json(server, "/v2/models/fm/infer", {{"inputs", input}});
  ASSERT_EQ(plain.status, 200) << plain.body;
  const json plain_reply = json::parse(plain.body);
  const auto probs = find_output(plain_reply, "probabilities")->at("data").get<std::vector<float>>();
  const auto logits = find_output(plain_reply, "logits")->at("data").get<std::vector<float>>();
  const std::vector<std::string> want_probs = expected_top_k(probs, 10, 3, labels),
                                  want_logits = expected_top_k(logits, 10, 10, labels);

  // JSON.
  const auto r = post_json(server, "/v2/models/fm/infer",
                           {{"inputs", input},
                            {"outputs", {{{"name", "probabilities"}, {"parameters", {{"classification", 3}}}},
                                         {{"name", "logits"}, {"parameters", {{"classification", 10}}}}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json reply = json::parse(r.body);
  const json* p = find_output(reply, "probabilities");
  ASSERT_TRUE(p) << r.body;
  EXPECT_EQ(p->at("datatype"), "BYTES");
  EXPECT_EQ(p->at("shape"), json::array({n, 3}));
  EXPECT_EQ(p->at("data").get<std::vector<std::string>>(), want_probs) << r.body;
  EXPECT_EQ(find_output(reply, "logits")->at("shape"), json::array({n, 10}));
  EXPECT_EQ(find_output(reply, "logits")->at("data").get<std::vector<std::string>>(), want_logits) << r.body;

  // Binary: the same strings as BYTES elements after the JSON header.
  const auto rb = post_json(server, "/v2/models/fm/infer",
                            {{"inputs", input},
                             {"outputs", {{{"name", "probabilities"},
                                           {"parameters", {{"classification", 3}, {"binary_data", true}}}}}}});
  ASSERT_EQ(rb.status, 200) << rb.body;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(rb.headers, m, std::regex("Inference-Header-Content-Length: ([0-9]+)", std::regex::icase)))
      << rb.headers;
  const size_t json_bytes = std::stoul(m[1]);
  const json bin_reply = json::parse(rb.body.substr(0, json_bytes));
  const json* bp = find_output(bin_reply, "probabilities");
  ASSERT_TRUE(bp) << rb.body;
  EXPECT_EQ(bp->at("datatype"), "BYTES");
  EXPECT_EQ(bp->at("shape"), json::array({n, 3}));
  EXPECT_EQ(bp->at("parameters").at("binary_data_size").get<size_t>(), rb.body.size() - json_bytes);
  EXPECT_EQ(split_bytes(std::string_view(rb.body).substr(json_bytes)), want_probs);

  // A k that is not a count of the model's classes is refused, naming it.
  for (const json& k : {json(0), json(-2), json(11), json("3")}) {
    const auto bad = post_json(server, "/v2/models/fm/infer",
                               {{"inputs", input}, {"outputs", {{{"name", "probabilities"}, {"parameters", {{"classification", k}}}}}}});
    EXPECT_EQ(bad.status, 400) << k << ": " << bad.body;
    EXPECT_NE(bad.body.find("classification"), std::string::npos) << bad.body;
  }

  // gRPC: the same strings, then both protocols' statistics of everything above.
  if (run_command("/usr/bin/python3 -c 'import grpc, grpc_tools' 2>&1").status != 0)
    GTEST_SKIP() << "Debian's python3-grpcio and python3-grpc-tools are not installed";
  if (server.grpc_port() < 0) GTEST_SKIP() << "convoy was built without gRPC: " << server.log();
  convoy::testing::write_file(dir_ / "pixels.bin", pixels);
  fs::create_directories(dir_ / "stubs");
  const auto g = run_command("/usr/bin/python3 " + std::string(CONVOY_SOURCE_DIR) + "/tests/serve/grpc_extensions.py " +
                             CONVOY_SOURCE_DIR + "/apps/serve/grpc " + (dir_ / "stubs").string() + " " +
                             std::to_string(server.port()) + " " + std::to_string(server.grpc_port()) + " fm " +
                             (dir_ / "pixels.bin").string() + " " + std::to_string(n) + " 2>&1");
  ASSERT_EQ(g.status, 0) << g.output;
  const json got = json::parse(g.output);
  for (const json& each : got.at("plain")) {
    EXPECT_EQ(each.at("probabilities").get<std::vector<float>>(), probs);
    EXPECT_EQ(each.at("logits").get<std::vector<float>>(), logits);
  }
  const json& c = got.at("classified");
  EXPECT_EQ(c.at("probabilities").at("datatype"), "BYTES");
  EXPECT_EQ(c.at("probabilities").at("shape"), json::array({n, 3}));
  EXPECT_EQ(c.at("probabilities").at("data").get<std::vector<std::string>>(), want_probs) << g.output;
  EXPECT_EQ(c.at("logits").at("shape"), json::array({n, 10}));
  EXPECT_EQ(c.at("logits").at("data").get<std::vector<std::string>>(), want_logits) << g.output;
  for (const auto& [k, result] : got.at("bad_k").items()) {
    EXPECT_EQ(result.get<std::string>().rfind("INVALID_ARGUMENT", 0), 0u) << k << ": " << result;
    EXPECT_NE(result.get<std::string>().find("classification"), std::string::npos) << k << ": " << result;
  }

  // Statistics: HTTP's text parsed into gRPC's message equals gRPC's, in every scope, and counts
  // 3 HTTP requests and 3 + 1 gRPC ones of 2 images each (the refused ones not at all).
  for (const char* scope : {"all", "model", "version"}) {
    const json& st = got.at("stats").at(scope);
    EXPECT_TRUE(st.at("same").get<bool>()) << scope << ": " << g.output;
    ASSERT_EQ(st.at("grpc").at("model_stats").size(), 1u) << scope;
    const json& s = st.at("grpc").at("model_stats")[0];
    EXPECT_EQ(s.at("name"), "fm");
    EXPECT_EQ(s.at("version"), "1");
    EXPECT_EQ(field(s, "inference_count"), 14u) << s;
    EXPECT_EQ(field(s, "execution_count"), 7u) << s;
    EXPECT_EQ(count_of_stat(s.at("inference_stats"), "success"), 7u) << s;
    EXPECT_EQ(count_of_stat(s.at("inference_stats"), "fail"), 0u) << s;
    EXPECT_EQ(batch_counts(s), (std::map<uint64_t, uint64_t>{{2, 7}})) << s;
  }
  EXPECT_EQ(got.at("stats_unknown_model").get<std::string>().rfind("NOT_FOUND", 0), 0u) << g.output;
  EXPECT_EQ(got.at("stats_unready_version").get<std::string>().rfind("NOT_FOUND", 0), 0u) << g.output;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
