// deploy/monitoring/ against a live `convoy serve`: the Grafana dashboard is a valid dashboard, and
// every metric it queries is in the /metrics of a real server on 127.0.0.1 (the model, server and
// host metrics here, on the CPU; the nv_gpu_* ones in tests/cuda/test_served_gpu_metrics.cpp, on a
// GPU). The device sampling's flags, and the Prometheus scrape configuration.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "engine/config/yaml_map.h"
#include "tests/serve/prometheus_format.h"
#include "tests/serve/serve_harness.h"
#include "tests/serve/serve_models.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using convoy::testing::http;
using convoy::testing::ServerProcess;

const std::string kDashboard = std::string(CONVOY_SOURCE_DIR) + "/deploy/monitoring/grafana/convoy-serve.json";
// What NVML gives, and a host without NVIDIA's driver does not: tested on a GPU.
const std::set<std::string> kGpuMetrics = {"nv_gpu_utilization",  "nv_gpu_memory_total_bytes", "nv_gpu_memory_used_bytes",
                                           "nv_gpu_power_usage",  "nv_gpu_power_limit",        "nv_energy_consumption"};

json dashboard() { return json::parse(convoy::testing::read_text(kDashboard)); }

std::string scrape(const ServerProcess& s, const fs::path& scratch) {
  return http("GET", "http://127.0.0.1:" + std::to_string(s.metrics_port()) + "/metrics", "", scratch).body;
}

// One LeNet-5 request of one grey image.
void infer_once(const ServerProcess& s, const fs::path& scratch) {
  const json body = {{"inputs", {{{"name", "input"}, {"shape", {1, 1, 28, 28}}, {"datatype", "UINT8"},
                                  {"data", std::vector<int>(784, 100)}}}}};
  convoy::testing::write_text_file(scratch / "request.json", body.dump());
  const auto r = http("POST", s.url("/v2/models/tiny/infer"), "--data-binary @" + (scratch / "request.json").string(), scratch);
  ASSERT_EQ(r.status, 200) << r.body;
}

TEST(ServeMonitoring, TheDashboardIsAValidGrafanaDashboard) {
  const json d = dashboard();
  ASSERT_TRUE(d.is_object());
  EXPECT_FALSE(d.value("title", "").empty());
  EXPECT_FALSE(d.value("uid", "").empty());
  EXPECT_LE(d.value("uid", "").size(), 40u);  // Grafana's limit
  EXPECT_GE(d.value("schemaVersion", 0), 30);
  // A data source variable of Prometheus, which every panel and query variable reads through: the
  // dashboard imports into any Grafana and asks which Prometheus.
  std::set<std::string> variables = {"__rate_interval", "__range", "__interval"};
  bool datasource = false;
  for (const json& v : d.at("templating").at("list")) {
    variables.insert(v.at("name").get<std::string>());
    if (v.value("type", "") == "datasource") datasource = v.value("name", "") == "datasource" && v.value("query", "") == "prometheus";
    if (v.value("type", "") == "query") {
      EXPECT_EQ(v.at("datasource").value("uid", ""), "${datasource}") << v.dump();
    }
  }
  EXPECT_TRUE(datasource) << "no Prometheus data source variable named datasource";
  const json& panels = d.at("panels");
  ASSERT_GT(panels.size(), 5u);
  std::set<int> ids;
  size_t with_targets = 0;
  for (const json& p : panels) {
    const std::string title = p.value("title", "");
    EXPECT_FALSE(title.empty()) << p.dump();
    EXPECT_TRUE(ids.insert(p.at("id").get<int>()).second) << "panel id twice: " << title;
    const json& g = p.at("gridPos");
    EXPECT_GE(g.at("x").get<int>(), 0) << title;
    EXPECT_LE(g.at("x").get<int>() + g.at("w").get<int>(), 24) << title;
    EXPECT_GT(g.at("h").get<int>(), 0) << title;
    if (p.at("type") == "row") continue;
    EXPECT_EQ(p.at("datasource").value("uid", ""), "${datasource}") << title;
    ASSERT_TRUE(p.contains("targets") && p["targets"].is_array() && !p["targets"].empty()) << title;
    std::set<std::string> refs;
    for (const json& t : p["targets"]) {
      const std::string expr = t.value("expr", "");
      EXPECT_FALSE(expr.empty()) << title;
      EXPECT_TRUE(refs.insert(t.value("refId", "")).second) << title << ": refId twice";
      // Every $variable a query uses is the dashboard's or Grafana's own.
      const std::regex var(R"(\$\{?([a-zA-Z_][a-zA-Z0-9_]*))");
      for (std::sregex_iterator it(expr.begin(), expr.end(), var), end; it != end; ++it)
        EXPECT_TRUE(variables.count((*it)[1].str())) << title << ": $" << (*it)[1] << " is no variable";
      int depth = 0;
      for (char c : expr) depth += c == '(' ? 1 : c == ')' ? -1 : 0;
      EXPECT_EQ(depth, 0) << title << ": unbalanced parentheses in " << expr;
    }
    ++with_targets;
  }
  EXPECT_GE(with_targets, 12u);
  // What issue 40 asks the dashboard to show, each from the metric that says it.
  const std::set<std::string> queried = convoy::testing::dashboard_metrics(d);
  for (const char* name : {"nv_inference_count", "convoy_inference_request_duration_us_bucket", "nv_inference_queue_duration_us",
                           "convoy_inference_batch_size_bucket", "nv_gpu_utilization", "nv_gpu_memory_used_bytes",
                           "convoy_model_memory_bytes", "convoy_model_memory_budget_bytes", "convoy_model_device_info",
                           "nv_cpu_utilization", "nv_cpu_memory_used_bytes"})
    EXPECT_TRUE(queried.count(name)) << "the dashboard shows no " << name;
}

TEST(ServeMonitoring, EveryMetricTheDashboardQueriesIsInALiveMetrics) {
  convoy::testing::TempDir dir("convoy-serve-monitoring");
  convoy::testing::write_tiny_repository(dir / "repo");
  ServerProcess server("--model-repository " + (dir / "repo").string() + " --metrics-interval-ms 100", dir.path());
  ASSERT_TRUE(server.started()) << server.log();
  infer_once(server, dir.path());
  const std::string text = scrape(server, dir.path());
  const convoy::testing::PrometheusText live = convoy::testing::parse_prometheus(text);
  ASSERT_TRUE(live.errors.empty()) << live.errors.front() << "\n" << text;
  const std::set<std::string> served = live.sample_names();
  size_t checked = 0;
  for (const std::string& name : convoy::testing::dashboard_metrics(dashboard())) {
    if (kGpuMetrics.count(name)) continue;  // tests/cuda/test_served_gpu_metrics.cpp
    EXPECT_TRUE(served.count(name)) << "the dashboard queries " << name << ", which /metrics does not serve:\n" << text;
    ++checked;
  }
  EXPECT_GE(checked, 15u);
  // The names the dashboard may query beyond these are only the GPU ones.
  for (const std::string& name : convoy::testing::dashboard_metrics(dashboard()))
    EXPECT_TRUE(served.count(name) || kGpuMetrics.count(name)) << name;
  // What the one request did, as the dashboard reads it.
  const std::map<std::string, std::string> tiny = {{"model", "tiny"}, {"version", "1"}};
  EXPECT_EQ(live.value("convoy_inference_batch_size_bucket", {{"model", "tiny"}, {"le", "1"}}), 1) << text;
  EXPECT_EQ(live.value("convoy_inference_request_duration_us_count", tiny), 1) << text;
  EXPECT_EQ(live.value("convoy_model_instance_count", tiny), 1) << text;
  EXPECT_EQ(live.value("convoy_model_device_info", {{"model", "tiny"}, {"device", "cpu"}}), 1) << text;
  EXPECT_GT(live.value("convoy_model_memory_bytes", tiny), 0) << text;
  EXPECT_EQ(live.value("convoy_model_memory_budget_bytes", tiny), 0) << text;  // no max_memory
  EXPECT_GT(live.value("nv_cpu_memory_total_bytes"), live.value("nv_cpu_memory_used_bytes")) << text;
  EXPECT_GE(live.value("nv_cpu_utilization"), 0) << text;
  EXPECT_LE(live.value("nv_cpu_utilization"), 1) << text;
}

TEST(ServeMonitoring, DeviceSamplingIsTurnedOffByTritonsFlags) {
  convoy::testing::TempDir dir("convoy-serve-monitoring");
  convoy::testing::write_tiny_repository(dir / "repo");
  ServerProcess off("--model-repository " + (dir / "repo").string() + " --allow-gpu-metrics=false --allow-cpu-metrics=false",
                    dir.path());
  ASSERT_TRUE(off.started()) << off.log();
  const std::string text = scrape(off, dir.path());
  EXPECT_EQ(text.find("nv_cpu_"), std::string::npos) << text;
  EXPECT_EQ(text.find("nv_gpu_"), std::string::npos) << text;
  EXPECT_NE(text.find("nv_inference_count{model=\"tiny\""), std::string::npos) << text;  // the rest is there
  EXPECT_EQ(off.log().find("GPU metrics"), std::string::npos) << off.log();

  ServerProcess bad("--model-repository " + (dir / "repo").string() + " --metrics-interval-ms 0", dir.path());
  EXPECT_FALSE(bad.started());
  EXPECT_NE(bad.log().find("--metrics-interval-ms"), std::string::npos) << bad.log();
}

TEST(ServeMonitoring, AHostWithoutNvidiasDriverSaysSoOnce) {
  if (void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(nvml);
    GTEST_SKIP() << "this host has libnvidia-ml.so.1 (tests/cuda/test_served_gpu_metrics.cpp reads it)";
  }
  convoy::testing::TempDir dir("convoy-serve-monitoring");
  convoy::testing::write_tiny_repository(dir / "repo");
  ServerProcess server("--model-repository " + (dir / "repo").string() + " --metrics-interval-ms 20", dir.path());
  ASSERT_TRUE(server.started()) << server.log();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // ten samples
  const std::string log = server.log();
  size_t lines = 0;
  for (size_t at = log.find("no GPU metrics"); at != std::string::npos; at = log.find("no GPU metrics", at + 1)) ++lines;
  EXPECT_EQ(lines, 1u) << log;
  EXPECT_NE(log.find("convoy serve: no GPU metrics: libnvidia-ml.so.1 cannot be loaded"), std::string::npos) << log;
  EXPECT_EQ(scrape(server, dir.path()).find("nv_gpu_"), std::string::npos);
  EXPECT_EQ(server.stop(), 0);
}

TEST(ServeMonitoring, PrometheusScrapesConvoyServesMetricsPort) {
  const YAML::Node config = convoy::yaml_load_file(std::string(CONVOY_SOURCE_DIR) + "/deploy/monitoring/prometheus.yml");
  bool local = false, pods = false;
  for (const YAML::Node& job : config["scrape_configs"]) {
    if (job["static_configs"]) {
      EXPECT_EQ(job["metrics_path"].as<std::string>(), "/metrics");
      for (const YAML::Node& target : job["static_configs"][0]["targets"])
        local = local || target.as<std::string>().ends_with(":8002");  // serve's --metrics-port default
    }
    if (job["kubernetes_sd_configs"])  // keeps the pods deploy/k8s/serve.yaml annotates
      for (const YAML::Node& rule : job["relabel_configs"])
        pods = pods || (rule["action"] && rule["action"].as<std::string>() == "keep" &&
                        rule["source_labels"][0].as<std::string>() == "__meta_kubernetes_pod_annotation_prometheus_io_scrape");
  }
  EXPECT_TRUE(local);
  EXPECT_TRUE(pods);
}

}  // namespace
