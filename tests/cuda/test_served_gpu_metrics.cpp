// `convoy serve` on a GPU: its /metrics has Triton's GPU metrics (nv_gpu_*, nv_energy_consumption)
// for the GPU it serves on, read through NVML, with values a GPU can have; every metric the
// Grafana dashboard (deploy/monitoring/grafana/convoy-serve.json) queries is served, the GPU ones
// included (tests/serve/test_serve_monitoring.cpp checks the rest on the CPU); and the model's
// convoy_model_device_info names the same GPU.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "engine/backends/backend.h"
#include "tests/serve/prometheus_format.h"
#include "tests/serve/serve_harness.h"
#include "tests/serve/serve_models.h"

namespace {

using json = nlohmann::json;
using convoy::testing::http;
using convoy::testing::ServerProcess;

TEST(ServedGpuMetrics, NvmlsGpuMetricsAndEveryDashboardMetricAreServed) {
  if (const std::string why = convoy::cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  convoy::testing::TempDir dir("convoy-served-gpu-metrics");
  convoy::testing::write_tiny_repository(dir / "repo");
  convoy::testing::write_text_file(dir / "repo" / "tiny" / "config.yaml", "max_batch_size: 4\ndevice: cuda\n");
  ServerProcess server("--model-repository " + (dir / "repo").string() + " --metrics-interval-ms 100", dir.path());
  ASSERT_TRUE(server.started()) << server.log();
  const json body = {{"inputs", {{{"name", "input"}, {"shape", {1, 1, 28, 28}}, {"datatype", "UINT8"},
                                  {"data", std::vector<int>(784, 100)}}}}};
  convoy::testing::write_text_file(dir / "request.json", body.dump());
  for (int i = 0; i < 20; ++i) {
    const auto r = http("POST", server.url("/v2/models/tiny/infer"), "--data-binary @" + (dir / "request.json").string(),
                        dir.path());
    ASSERT_EQ(r.status, 200) << r.body;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a few samples since
  const std::string text =
      http("GET", "http://127.0.0.1:" + std::to_string(server.metrics_port()) + "/metrics", "", dir.path()).body;
  const convoy::testing::PrometheusText m = convoy::testing::parse_prometheus(text);
  ASSERT_TRUE(m.errors.empty()) << m.errors.front() << "\n" << text;

  const json dashboard = json::parse(convoy::testing::read_text(std::string(CONVOY_SOURCE_DIR) +
                                                                "/deploy/monitoring/grafana/convoy-serve.json"));
  const std::set<std::string> served = m.sample_names();
  for (const std::string& name : convoy::testing::dashboard_metrics(dashboard))
    EXPECT_TRUE(served.count(name)) << "the dashboard queries " << name << ", which /metrics does not serve:\n"
                                    << server.log() << "\n" << text;

  std::set<std::string> gpus;
  for (const auto& s : m.samples)
    if (s.name == "nv_gpu_memory_total_bytes") gpus.insert(s.labels.at("gpu_uuid"));
  ASSERT_FALSE(gpus.empty()) << server.log();
  for (const std::string& uuid : gpus) {
    const std::map<std::string, std::string> gpu = {{"gpu_uuid", uuid}};
    EXPECT_EQ(uuid.rfind("GPU-", 0), 0u) << uuid;
    EXPECT_GT(m.value("nv_gpu_memory_total_bytes", gpu), 1e9) << uuid;
    EXPECT_GT(m.value("nv_gpu_memory_used_bytes", gpu), 0) << uuid;
    EXPECT_LE(m.value("nv_gpu_memory_used_bytes", gpu), m.value("nv_gpu_memory_total_bytes", gpu)) << uuid;
    EXPECT_GE(m.value("nv_gpu_utilization", gpu), 0) << uuid;
    EXPECT_LE(m.value("nv_gpu_utilization", gpu), 1) << uuid;
    EXPECT_GT(m.value("nv_gpu_power_limit", gpu), 10) << uuid;
    EXPECT_GT(m.value("nv_gpu_power_usage", gpu), 1) << uuid;
    EXPECT_GE(m.value("nv_energy_consumption", gpu), 0) << uuid;
  }
  // The model's GPU is one of those reported, by the same uuid.
  std::string model_gpu;
  for (const auto& s : m.samples)
    if (s.name == "convoy_model_device_info" && s.labels.at("model") == "tiny") model_gpu = s.labels.at("gpu_uuid");
  EXPECT_TRUE(gpus.count(model_gpu)) << "model tiny on '" << model_gpu << "'\n" << text;
  EXPECT_EQ(m.value("convoy_model_device_info", {{"model", "tiny"}, {"device", "cuda:0"}}), 1) << text;
}

}  // namespace
