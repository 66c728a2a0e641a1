// `convoy serve` end to end: the real server on 127.0.0.1, curl as the client. Inference
// results against the engine run in-process on the same checkpoint, JSON against binary
// tensors, version policies, memory budgets, broken models, bad requests and metrics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <utility>
#include <random>

#include <nlohmann/json.hpp>

#include "engine/backends/backend.h"
#include "engine/bundle/run_checkpoint.h"
#include "engine/graph/model.h"
#include "engine/inference/batched_plans.h"
#include "engine/inference/inference_plan.h"
#include "engine/inference/quantize.h"
#include "engine/bundle/evaluate.h"
#include "tests/serve/serve_fixture.h"

namespace {

namespace fs = std::filesystem;

convoy::Model lenet5() { return convoy::Model::from_file(std::string(CONVOY_SOURCE_DIR) + "/models/lenet5.yaml", 0); }

// A LeNet-5 version's memory estimate per instance before it loads, as the server makes it:
// weights plus every activation at max_batch.
uint64_t lenet_estimate(const convoy::Model& lenet, int64_t max_batch) {
  return 4 * static_cast<uint64_t>(lenet.parameter_count() + lenet.buffer_count()) +
         4 * static_cast<uint64_t>(max_batch * (lenet.activation_count() + convoy::shape_numel(lenet.input_shape())));
}

// Instances of LeNet-5 at batch 65,536 (the serve fixture's checkpoints) that need about twice
// the memory this host has available (MemAvailable), at most the 64 a config allows.
int64_t instances_beyond_ram() {
  const double per_instance = static_cast<double>(lenet_estimate(lenet5(), 65536));
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kb = 0;
  while (meminfo >> key && key != "MemAvailable:") meminfo.ignore(256, '\n');
  meminfo >> kb;
  return std::min<int64_t>(64, static_cast<int64_t>(2.0 * kb * 1024.0 / per_instance) + 1);
}
// The estimate at max_batch, and the bytes the server measures once the version's CPU inference
// plans are built (weights and plans).
std::pair<uint64_t, uint64_t> lenet_estimate_and_planned_bytes(int64_t max_batch) {
  convoy::Model lenet = lenet5();
  const uint64_t weights = 4 * static_cast<uint64_t>(lenet.parameter_count() + lenet.buffer_count());
  const convoy::BatchedPlans plans(lenet, max_batch, {});
  return {lenet_estimate(lenet, max_batch), weights + plans.bytes()};
}
using json = nlohmann::json;
using convoy::testing::http;
using convoy::testing::ServerProcess;
using ServeE2E = convoy::testing::ServeTest;

// The engine's own answer for the same checkpoint: logits of f32 input, probabilities of u8.
struct Reference {
  explicit Reference(const std::string& checkpoint)
      : backend(convoy::make_cpu_backend({})),
        ckpt(convoy::read_run_checkpoint(checkpoint, convoy::CheckpointUse::inference)),
        model(convoy::Model::from_yaml(ckpt.info.model_yaml, checkpoint, 0)) {
    model.load_state(ckpt.tensors, checkpoint);
    model.to(*backend, convoy::DType::f32);
  }
  std::vector<float> logits(const std::vector<float>& x, int64_t n) {  // x: (n, 1, 28, 28)
    return model.forward(*backend, convoy::Tensor::from_floats(x, {n, 1, 28, 28}), {}).to_floats();
  }
  std::vector<float> probabilities(const std::vector<uint8_t>& pixels, int64_t n) {
    convoy::Tensor t = convoy::Tensor::empty({n, 1, 28, 28}, convoy::DType::u8);
    std::copy(pixels.begin(), pixels.end(), t.data<uint8_t>());
    return convoy::predict_probabilities(model, *backend, t, convoy::make_normalize(ckpt.info.mean, ckpt.info.std));
  }
  std::unique_ptr<convoy::Backend> backend;
  convoy::RunCheckpoint ckpt;
  convoy::Model model;
};

std::vector<float> output_data(const json& reply, const std::string& name) {
  for (const json& o : reply.at("outputs"))
    if (o.at("name") == name) return o.at("data").get<std::vector<float>>();
  return {};
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << what << "[" << i << "]";
}

TEST_F(ServeE2E, InferJsonAndBinaryTensorsMatchTheEngine) {
  add_model("fm", 1, checkpoint_a_, "max_batch_size: 8\ndevice: cpu\n");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  const int64_t n = 3;
  std::mt19937 rng(5);
  std::vector<uint8_t> pixels(n * 784);
  for (uint8_t& p : pixels) p = static_cast<uint8_t>(rng() % 256);
  Reference ref(checkpoint_a_);
  const double mean = ref.ckpt.info.mean[0], stdev = ref.ckpt.info.std[0];
  std::vector<float> x(pixels.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((pixels[i] / 255.0 - mean) / stdev);

  // UINT8 pixels as JSON: the checkpoint's normalization is applied.
  const json u8_request = {{"id", "r1"},
                           {"inputs", {{{"name", "input"}, {"shape", {n, 1, 28, 28}}, {"datatype", "UINT8"}, {"data", pixels}}}}};
  const auto u8 = post_json(server, "/v2/models/fm/infer", u8_request);
  ASSERT_EQ(u8.status, 200) << u8.body;
  const json u8_reply = json::parse(u8.body);
  EXPECT_EQ(u8_reply.at("id"), "r1");
  EXPECT_EQ(u8_reply.at("model_version"), "1");
  expect_close(output_data(u8_reply, "probabilities"), ref.probabilities(pixels, n), 1e-5, "probabilities");
  expect_close(output_data(u8_reply, "logits"), ref.logits(x, n), 1e-4, "logits of u8");

  // The same pixels channels-last, UINT8 [n, H, W, C] as images are stored: the same answer.
  const json nhwc_request = {{"inputs", {{{"name", "input"}, {"shape", {n, 28, 28, 1}}, {"datatype", "UINT8"}, {"data", pixels}}}}};
  const auto nhwc = post_json(server, "/v2/models/fm/infer", nhwc_request);
  ASSERT_EQ(nhwc.status, 200) << nhwc.body;
  EXPECT_EQ(output_data(json::parse(nhwc.body), "probabilities"), output_data(u8_reply, "probabilities"));

  // FP32 model input as nested JSON arrays, only the logits asked for.
  json nested = json::array();
  for (int64_t b = 0; b < n; ++b) {
    json image = json::array();
    for (int r = 0; r < 28; ++r)
      image.push_back(std::vector<float>(x.begin() + b * 784 + r * 28, x.begin() + b * 784 + r * 28 + 28));
    nested.push_back(json::array({image}));
  }
  const json f32_request = {{"inputs", {{{"name", "input"}, {"shape", {n, 1, 28, 28}}, {"datatype", "FP32"}, {"data", nested}}}},
                            {"outputs", {{{"name", "logits"}}}}};
  const auto f32 = post_json(server, "/v2/models/fm/versions/1/infer", f32_request);
  ASSERT_EQ(f32.status, 200) << f32.body;
  const json f32_reply = json::parse(f32.body);
  ASSERT_EQ(f32_reply.at("outputs").size(), 1u);
  const std::vector<float> want_logits = ref.logits(x, n);
  expect_close(output_data(f32_reply, "logits"), want_logits, 1e-5, "logits of f32");

  // The same floats as Triton's binary tensor data, binary outputs back.
  const std::string header = json({{"inputs", {{{"name", "input"}, {"shape", {n, 1, 28, 28}}, {"datatype", "FP32"},
                                               {"parameters", {{"binary_data_size", x.size() * 4}}}}}},
                                   {"outputs", {{{"name", "logits"}, {"parameters", {{"binary_data", true}}}},
                                                {{"name", "probabilities"}}}}})
                                 .dump();
  std::vector<uint8_t> body(header.begin(), header.end());
  const auto* raw = reinterpret_cast<const uint8_t*>(x.data());
  body.insert(body.end(), raw, raw + x.size() * 4);
  convoy::testing::write_file(dir_ / "binary.bin", body);
  const auto bin = http("POST", server.url("/v2/models/fm/infer"),
                        "--data-binary @" + (dir_ / "binary.bin").string() + " -H 'Content-Type: application/octet-stream'" +
                            " -H 'Inference-Header-Content-Length: " + std::to_string(header.size()) + "'",
                        dir_.path());
  ASSERT_EQ(bin.status, 200) << bin.body;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(bin.headers, m, std::regex("Inference-Header-Content-Length: ([0-9]+)", std::regex::icase)))
      << bin.headers;
  const size_t json_bytes = std::stoul(m[1]);
  const json bin_reply = json::parse(bin.body.substr(0, json_bytes));
  EXPECT_EQ(bin_reply.at("outputs")[0].at("parameters").at("binary_data_size"), n * 10 * 4);
  ASSERT_EQ(bin.body.size(), json_bytes + n * 10 * 4);
  std::vector<float> bin_logits(n * 10);
  std::memcpy(bin_logits.data(), bin.body.data() + json_bytes, bin_logits.size() * 4);
  EXPECT_EQ(bin_logits, output_data(f32_reply, "logits"));  // the same bytes either way
  expect_close(output_data(bin_reply, "probabilities"), output_data(u8_reply, "probabilities"), 1e-5, "binary path");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// `precision:` on the CPU: an int8 checkpoint from `convoy quantize` serves in int8 by itself
// (auto), and exactly as the engine's int8 plans compute it; `precision: fp32` serves its fp32
// weights; bf16 where the CPU has it, else refused with the reason; int8 without calibrated
// ranges refused.
TEST_F(ServeE2E, ReducedPrecisionOnTheCpuServesWhatTheEnginesPlansCompute) {
  const std::string int8 = (dir_.path() / "int8.safetensors").string();
  const auto q = convoy::testing::run_command(std::string(CONVOY_BINARY) + " quantize --model " + checkpoint_a_ +
                                              " --calibration fashion-mnist:train --samples 256 -o " + int8 + " 2>&1");
  ASSERT_EQ(q.status, 0) << q.output;
  add_model("q8", 1, int8, "device: cpu\nmax_batch_size: 4\n");
  add_model("q8fp32", 1, int8, "device: cpu\nmax_batch_size: 4\nprecision: fp32\n");
  add_model("bf", 1, checkpoint_a_, "device: cpu\nmax_batch_size: 4\nprecision: bf16\n");
  add_model("noranges", 1, checkpoint_a_, "device: cpu\nprecision: int8\n");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  const std::string log = server.log();
  EXPECT_NE(log.find("'q8' version 1 READY on cpu (1 instance(s), max batch 4, int8 inference plans for batches 1, 2, 4"),
            std::string::npos) << log;
  EXPECT_NE(log.find("'q8fp32' version 1 READY on cpu (1 instance(s), max batch 4, inference plans"), std::string::npos)
      << log;
  const std::string bf16_missing = convoy::bf16_unsupported_reason();
  if (bf16_missing.empty())
    EXPECT_NE(log.find("'bf' version 1 READY on cpu (1 instance(s), max batch 4, bf16 inference plans"), std::string::npos)
        << log;
  else
    EXPECT_NE(log.find("'bf' version 1 UNAVAILABLE: model 'bf' version 1: bf16 inference: " + bf16_missing),
              std::string::npos) << log;
  EXPECT_NE(log.find("'noranges' version 1 UNAVAILABLE: model 'noranges' version 1: int8 inference: " +
                     (repo() / "noranges/1/model.safetensors").string() + " is not an int8 checkpoint"),
            std::string::npos) << log;

  // Three images of model input (a padded pass of 4), against the engine's int8 and fp32 plans.
  const int64_t n = 3;
  std::vector<float> x(n * 784);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  const json request = {{"inputs", {{{"name", "input"}, {"shape", {n, 1, 28, 28}}, {"datatype", "FP32"}, {"data", x}}}},
                        {"outputs", {{{"name", "logits"}}}}};
  convoy::RunCheckpoint ckpt = convoy::read_run_checkpoint(int8, convoy::CheckpointUse::inference);
  convoy::Model model = convoy::Model::from_yaml(ckpt.info.model_yaml, int8, 0);
  model.load_state(ckpt.tensors, int8);
  const convoy::Tensor input = convoy::Tensor::from_floats(x, {n, 1, 28, 28});
  convoy::InferenceOptions int8_options;
  int8_options.precision = convoy::Precision::int8;
  int8_options.activation_max = convoy::activation_max_by_node(model, ckpt.info.int8_activation_max, int8);
  const std::vector<float> want_int8 = convoy::BatchedPlans(model, 4, int8_options).run(input).to_floats();
  const std::vector<float> want_fp32 = convoy::BatchedPlans(model, 4, {}).run(input).to_floats();
  const auto q8 = post_json(server, "/v2/models/q8/infer", request);
  ASSERT_EQ(q8.status, 200) << q8.body;
  expect_close(output_data(json::parse(q8.body), "logits"), want_int8, 1e-5, "int8 logits");
  const auto fp32 = post_json(server, "/v2/models/q8fp32/infer", request);
  ASSERT_EQ(fp32.status, 200) << fp32.body;
  expect_close(output_data(json::parse(fp32.body), "logits"), want_fp32, 1e-5, "fp32 logits");
  double apart = 0;  // int8 is not fp32 under another name
  for (size_t i = 0; i < want_fp32.size(); ++i) apart = std::max(apart, double(std::fabs(want_int8[i] - want_fp32[i])));
  EXPECT_GT(apart, 1e-4);
}

TEST_F(ServeE2E, VersionPoliciesServeTheVersionsTheyName) {
  for (int v : {1, 2, 3}) add_model("latest", v, v == 2 ? checkpoint_b_ : checkpoint_a_, "version_policy: {latest: 2}\n");
  for (int v : {1, 2, 3}) add_model("pinned", v, checkpoint_a_, "version_policy: {specific: [1, 3]}\n");
  for (int v : {1, 2}) add_model("every", v, checkpoint_a_, "version_policy: {all: true}\n");
  add_model("default", 1, checkpoint_a_, "");
  add_model("default", 4, checkpoint_b_, "");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  auto ready = [&](const std::string& m, int v) {
    return http("GET", server.url("/v2/models/" + m + "/versions/" + std::to_string(v) + "/ready"), "", dir_.path()).status;
  };
  EXPECT_EQ(ready("latest", 1), 400);
  EXPECT_EQ(ready("latest", 2), 200);
  EXPECT_EQ(ready("latest", 3), 200);
  EXPECT_EQ(ready("pinned", 1), 200);
  EXPECT_EQ(ready("pinned", 2), 400);
  EXPECT_EQ(ready("pinned", 3), 200);
  EXPECT_EQ(ready("every", 1), 200);
  EXPECT_EQ(ready("every", 2), 200);
  EXPECT_EQ(ready("default", 1), 400);
  EXPECT_EQ(ready("default", 4), 200);
  const auto meta = http("GET", server.url("/v2/models/pinned"), "", dir_.path());
  ASSERT_EQ(meta.status, 200);
  EXPECT_EQ(json::parse(meta.body).at("versions"), json::array({"1", "3"}));
  // No version in the URL: the highest ready one answers; versions of other weights differ.
  const json request = {{"inputs", {{{"name", "input"}, {"shape", {1, 1, 28, 28}}, {"datatype", "UINT8"},
                                     {"data", std::vector<int>(784, 128)}}}}};
  const auto latest = post_json(server, "/v2/models/latest/infer", request);
  ASSERT_EQ(latest.status, 200) << latest.body;
  EXPECT_EQ(json::parse(latest.body).at("model_version"), "3");
  const auto v2 = post_json(server, "/v2/models/latest/versions/2/infer", request);
  ASSERT_EQ(v2.status, 200) << v2.body;
  EXPECT_NE(output_data(json::parse(v2.body), "logits"), output_data(json::parse(latest.body), "logits"));
  EXPECT_EQ(post_json(server, "/v2/models/latest/versions/1/infer", request).status, 404);
}

TEST_F(ServeE2E, OverBudgetBrokenAndMisconfiguredModelsLeaveTheOthersServing) {
  add_model("good", 1, checkpoint_a_, "device: cpu\nmax_memory: 256MiB\nmax_batch_size: 4\n");
  add_model("big", 1, checkpoint_a_, "max_memory: 100KiB\n");  // LeNet-5's weights alone are 1.6 MiB
  // No budget of its own, but more instances at a larger batch than this host has memory for.
  add_model("huge", 1, checkpoint_a_,
            "device: cpu\nmax_batch_size: 65536\ninstance_count: " + std::to_string(instances_beyond_ram()) + "\n");
  // Within its budget by the estimate (weights and activations at batch 1), over it once its CPU
  // inference plans (their reordered weights and arena) are built and measured.
  const auto [estimate, planned] = lenet_estimate_and_planned_bytes(1);
  ASSERT_LT(estimate, planned);
  add_model("planned", 1, checkpoint_a_,
            "device: cpu\nmax_batch_size: 1\nmax_memory: " + std::to_string((estimate + planned) / 2) + "\n");
  add_model("broken", 1, checkpoint_a_, "");
  convoy::testing::write_text_file(repo() / "broken/1/model.safetensors", "not a checkpoint");
  add_model("typo", 1, checkpoint_a_, "max_batch_size: 4\nmax_batch: 8\n");
  ServerProcess server(repo_arg(), dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  const auto index = http("POST", server.url("/v2/repository/index"), "", dir_.path());
  ASSERT_EQ(index.status, 200) << index.body;
  std::map<std::string, json> by_name;
  for (const json& e : json::parse(index.body)) by_name[e.at("name").get<std::string>()] = e;
  ASSERT_EQ(by_name.size(), 6u) << index.body;
  EXPECT_EQ(by_name["good"].at("state"), "READY");
  EXPECT_NE(server.log().find("'good' version 1 READY on cpu (1 instance(s), max batch 4, inference plans for batches 1, 2, 4 ("),
            std::string::npos) << server.log();
  EXPECT_EQ(by_name["planned"].at("state"), "UNAVAILABLE");
  EXPECT_NE(by_name["planned"].at("reason").get<std::string>().find("of CPU inference plans up to batch 1"),
            std::string::npos) << index.body;
  EXPECT_EQ(by_name["big"].at("state"), "UNAVAILABLE");
  EXPECT_NE(by_name["big"].at("reason").get<std::string>().find("max_memory"), std::string::npos) << index.body;
  EXPECT_EQ(by_name["huge"].at("state"), "UNAVAILABLE");
  EXPECT_NE(by_name["huge"].at("reason").get<std::string>().find("free on cpu"), std::string::npos) << index.body;
  EXPECT_EQ(by_name["broken"].at("state"), "UNAVAILABLE");
  EXPECT_NE(by_name["broken"].at("reason").get<std::string>().find("model.safetensors"), std::string::npos);
  EXPECT_EQ(by_name["typo"].at("state"), "UNAVAILABLE");
  EXPECT_NE(by_name["typo"].at("reason").get<std::string>().find("config.yaml:2: max_batch: unknown key"),
            std::string::npos) << index.body;
  const json request = {{"inputs", {{{"name", "input"}, {"shape", {1, 1, 28, 28}}, {"datatype", "UINT8"},
                                     {"data", std::vector<int>(784, 7)}}}}};
  EXPECT_EQ(post_json(server, "/v2/models/good/infer", request).status, 200);
  const auto big = post_json(server, "/v2/models/big/infer", request);
  EXPECT_EQ(big.status, 404);
  EXPECT_NE(big.body.find("max_memory"), std::string::npos) << big.body;
  EXPECT_EQ(http("GET", server.url("/v2/health/ready"), "", dir_.path()).status, 200);
  EXPECT_EQ(server.stop(), 0);
}

TEST_F(ServeE2E, BadRequestsGet4xxWithAMessageAndTheServerKeepsServing) {
  add_model("fm", 1, checkpoint_a_, "max_batch_size: 2\n");
  ServerProcess server(repo_arg() + " --log-requests", dir_.path());
  ASSERT_TRUE(server.started()) << server.log();
  auto input = [](const json& shape, const std::string& dtype, const json& data) {
    return json{{"inputs", {{{"name", "input"}, {"shape", shape}, {"datatype", dtype}, {"data", data}}}}};
  };
  const std::vector<int> one(784, 1);
  auto with_timeout = [&](const json& timeout) {
    json j = input({1, 1, 28, 28}, "UINT8", one);
    j["parameters"] = {{"timeout", timeout}};
    return j;
  };
  std::vector<double> overflowing(784, 0.5);
  overflowing[7] = 1e39;  // a finite double, +inf as a float
  struct Case {
    std::string body;
    int status;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"{not json", 400, "malformed JSON"},
      {"[1, 2]", 400, "JSON object"},
      {input({1, 1, 28, 27}, "UINT8", one).dump(), 400, "shape"},
      {input({3, 1, 28, 28}, "UINT8", one).dump(), 400, "n <= 2"},
      {input({1, 1, 28, 28}, "INT64", one).dump(), 400, "INT64"},
      {input({1, 1, 28, 28}, "UINT8", std::vector<int>(783, 1)).dump(), 400, "783 data elements"},
      {input({1, 1, 28, 28}, "UINT8", std::vector<int>(784, 300)).dump(), 400, "0 to 255"},
      {input({1, 1, 28, 28}, "FP32", json::array({"x"})).dump(), 400, "expected numbers"},
      {input({1, 1, 28, 28}, "FP32", overflowing).dump(), 400, "input 'input': FP32 data must be finite"},
      {with_timeout(-1).dump(), 400, "parameters.timeout"},
      {with_timeout(1.5).dump(), 400, "parameters.timeout"},
      {json{{"inputs", {{{"name", "image"}, {"shape", {1, 1, 28, 28}}, {"datatype", "UINT8"}, {"data", one}}}}}.dump(), 400,
       "unknown input 'image'"},
      {json{{"inputs", input({1, 1, 28, 28}, "UINT8", one)["inputs"]}, {"outputs", {{{"name", "scores"}}}}}.dump(), 400,
       "unknown output 'scores'"},
  };
  for (const Case& c : cases) {
    convoy::testing::write_text_file(dir_ / "bad.json", c.body);
    const auto r = http("POST", server.url("/v2/models/fm/infer"), "--data-binary @" + (dir_ / "bad.json").string(), dir_.path());
    EXPECT_EQ(r.status, c.status) << c.body.substr(0, 80) << " -> " << r.body;
    EXPECT_NE(json::parse(r.body, nullptr, false).value("error", "").find(c.says), std::string::npos)
        << c.body.substr(0, 80) << " -> " << r.body;
  }
  // Truncated binary data: the header promises 3136 bytes, 100 follow.
  const std::string header = json{{"inputs", {{{"name", "input"}, {"shape", {1, 1, 28, 28}}, {"datatype", "FP32"},
                                               {"parameters", {{"binary_data_size", 3136}}}}}}}.dump();
  convoy::testing::write_text_file(dir_ / "short.bin", header + std::string(100, '\0'));
  const auto truncated = http("POST", server.url("/v2/models/fm/infer"),
                              "--data-binary @" + (dir_ / "short.bin").string() + " -H 'Inference-Header-Content-Length: " +
                                  std::to_string(header.size()) + "'",
                              dir_.path());
  EXPECT_EQ(truncated.status, 400);
  EXPECT_NE(truncated.body.find("truncated binary data"), std::string::npos) << truncated.body;
  EXPECT_EQ(http("POST", server.url("/v2/models/nope/infer"), "-d '{}'", dir_.path()).status, 404);
  EXPECT_EQ(http("POST", server.url("/v2/models/fm/versions/9/infer"), "-d '{}'", dir_.path()).status, 404);
  EXPECT_EQ(http("GET", server.url("/v2/nothing/here"), "", dir_.path()).status, 404);
  EXPECT_EQ(http("POST", server.url("/v2/models/fm/classify"), "--data-binary 'GIF89a...'", dir_.path()).status, 400);
  // A body over the 64 MiB limit is refused, not read.
  const auto huge = http("POST", server.url("/v2/models/fm/infer"), "-H 'Content-Length: 100000000' -d x", dir_.path());
  EXPECT_TRUE(huge.status == 413 || huge.status == 0) << huge.status << " " << huge.body;
  // The largest timeouts are cut to one hour, not added to the clock (which overflowed to an
  // instant 504): 2^63 - 1, and 2^64 - 1 (which JSON holds unsigned).
  for (const json& t : {json(std::numeric_limits<int64_t>::max()), json(std::numeric_limits<uint64_t>::max())}) {
    const auto r = post_json(server, "/v2/models/fm/infer", with_timeout(t));
    EXPECT_EQ(r.status, 200) << t.dump() << " -> " << r.body;
  }
  // Still serving, and the request log has one JSON line per request.
  EXPECT_EQ(post_json(server, "/v2/models/fm/infer", input({1, 1, 28, 28}, "UINT8", one)).status, 200);
  EXPECT_EQ(server.stop(), 0) << server.log();
  int lines = 0;
  std::istringstream log(server.request_log());
  for (std::string line; std::getline(log, line); ++lines) EXPECT_FALSE(json::parse(line, nullptr, false).is_discarded()) << line;
  EXPECT_GE(lines, static_cast<int>(cases.size()) + 5);
}

}  // namespace
