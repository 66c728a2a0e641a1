// The metrics of convoy serve's /metrics that need no server: /proc/stat and /proc/meminfo parsed
// as Triton's CPU metrics read them, NVML absent (one log line, no nv_gpu_* series) and present
// (tests/serve/fake_nvml: two GPUs of known readings, one without power), the sampling thread, the
// lock-free histograms, and the whole text in Prometheus's exposition format.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cmath>
#include <sstream>
#include <thread>

#include "apps/serve/device_metrics.h"
#include "apps/serve/host_metrics.h"
#include "apps/serve/metrics.h"
#include "apps/serve/nvml.h"
#include "tests/serve/prometheus_format.h"

namespace {

using namespace convoy::serve;
using convoy::testing::parse_prometheus;
using convoy::testing::PrometheusText;

const std::string kGpu0 = "GPU-00000000-1111-2222-3333-444444444444";
const std::string kGpu1 = "GPU-55555555-6666-7777-8888-999999999999";

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string prometheus(const DeviceMetrics& d) {
  std::ostringstream out;
  d.write_prometheus(out);
  return out.str();
}

DeviceMetricsOptions fake_gpus(bool cpu = false) {
  DeviceMetricsOptions o;
  o.cpu = cpu;
  o.interval = std::chrono::milliseconds(0);  // sampled by the test
  o.nvml_library = CONVOY_FAKE_NVML;
  return o;
}

TEST(ServeHostMetrics, ProcStatGivesTheAggregateCpuLine) {
  const std::string text =
      "cpu  4705 356 584 3699 23 23 0 7 11 0\n"
      "cpu0 1393280 32966 572056 13343292 6130 0 17875 0 0 0\n"
      "intr 1462898\n";
  const auto t = parse_proc_stat(text);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->user, 4705u);
  EXPECT_EQ(t->nice, 356u);
  EXPECT_EQ(t->system, 584u);
  EXPECT_EQ(t->idle, 3699u);
  EXPECT_EQ(t->iowait, 23u);
  EXPECT_EQ(t->irq, 23u);
  EXPECT_EQ(t->softirq, 0u);
  EXPECT_EQ(t->steal, 7u);  // guest (11) is in user already: not read
  // An old kernel's four fields; the rest count 0.
  const auto old = parse_proc_stat("cpu 1 2 3 4\n");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->idle, 4u);
  EXPECT_EQ(old->steal, 0u);
  EXPECT_FALSE(parse_proc_stat("cpu0 1 2 3 4\n"));  // per-core lines only
  EXPECT_FALSE(parse_proc_stat("cpu 1 2 x 4\n"));
  EXPECT_FALSE(parse_proc_stat("cpu 1 2 3\n"));
  EXPECT_FALSE(parse_proc_stat(""));
}

TEST(ServeHostMetrics, CpuUtilizationIsBusyTicksOverAllTicksBetweenReadings) {
  const CpuTimes before{100, 10, 50, 1000, 20, 5, 5, 0};
  const CpuTimes after{160, 10, 80, 1080, 40, 5, 15, 10};
  // busy: 60 + 0 + 30 + 0 + 10 + 10 = 110; idle: 80 + 20 = 100.
  EXPECT_DOUBLE_EQ(cpu_utilization(before, after), 110.0 / 210.0);
  EXPECT_DOUBLE_EQ(cpu_utilization(before, before), 0.0);  // no tick passed
  // A counter that went backwards counts 0, not 2^64 - n.
  CpuTimes backwards = after;
  backwards.user = 1;
  EXPECT_DOUBLE_EQ(cpu_utilization(before, backwards), 50.0 / 150.0);
  const CpuTimes busy{0, 0, 0, 0, 0, 0, 0, 0}, all_busy{100, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_DOUBLE_EQ(cpu_utilization(busy, all_busy), 1.0);
}

TEST(ServeHostMetrics, MeminfoGivesTotalAndTotalLessAvailable) {
  const std::string text =
      "MemTotal:       16314104 kB\n"
      "MemFree:          801548 kB\n"
      "MemAvailable:    9868472 kB\n"
      "Buffers:          423104 kB\n";
  const auto m = parse_meminfo(text);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->total, 16314104ull * 1024);
  EXPECT_EQ(m->used, (16314104ull - 9868472ull) * 1024);
  EXPECT_FALSE(parse_meminfo("MemTotal: 100 kB\nMemFree: 50 kB\n"));             // no MemAvailable (kernel < 3.14)
  EXPECT_FALSE(parse_meminfo("MemTotal: 100 kB\nMemAvailable: 200 kB\n"));       // available > total
  EXPECT_FALSE(parse_meminfo("MemTotal: lots kB\nMemAvailable: 200 kB\n"));
}

TEST(ServeHostMetrics, ThisHostsProcFilesParse) {
  const auto stat = parse_proc_stat(read_proc_file("/proc/stat"));
  ASSERT_TRUE(stat) << read_proc_file("/proc/stat").substr(0, 200);
  EXPECT_GT(stat->user + stat->system + stat->idle, 0u);
  const auto memory = parse_meminfo(read_proc_file("/proc/meminfo"));
  ASSERT_TRUE(memory);
  EXPECT_GT(memory->total, memory->used);
  EXPECT_EQ(read_proc_file("/proc/no-such-file"), "");
}

TEST(ServeNvml, AnAbsentLibraryIsSaidOnceAndGivesNoGpuSeries) {
  const Nvml nvml("libconvoy-no-such-nvml.so.1");
  EXPECT_FALSE(nvml.usable());
  EXPECT_NE(nvml.error().find("libconvoy-no-such-nvml.so.1 cannot be loaded"), std::string::npos) << nvml.error();
  std::vector<std::string> problems;
  EXPECT_TRUE(nvml.devices(std::nullopt, problems).empty());

  std::ostringstream log;
  DeviceMetricsOptions o;
  o.interval = std::chrono::milliseconds(0);
  o.nvml_library = "libconvoy-no-such-nvml.so.1";
  DeviceMetrics d(o, log);
  for (int i = 0; i < 3; ++i) d.sample();
  EXPECT_EQ(count_of(log.str(), "\n"), 1u) << log.str();
  EXPECT_NE(log.str().find("convoy serve: no GPU metrics: libconvoy-no-such-nvml.so.1 cannot be loaded"),
            std::string::npos)
      << log.str();
  const std::string text = prometheus(d);
  EXPECT_EQ(text.find("nv_gpu"), std::string::npos) << text;
  EXPECT_EQ(text.find("nv_energy"), std::string::npos) << text;
  // The host's metrics are there all the same.
  const PrometheusText parsed = parse_prometheus(text);
  EXPECT_TRUE(parsed.errors.empty()) << parsed.errors.front();
  EXPECT_GE(parsed.value("nv_cpu_utilization"), 0.0);
  EXPECT_LE(parsed.value("nv_cpu_utilization"), 1.0);
  EXPECT_GT(parsed.value("nv_cpu_memory_total_bytes"), parsed.value("nv_cpu_memory_used_bytes"));
  EXPECT_TRUE(d.gpus().empty());
}

TEST(ServeNvml, ADriverThatDoesNotStartIsSaidWithNvmlsReason) {
  setenv("CONVOY_FAKE_NVML_INIT", "fail", 1);
  const Nvml nvml(CONVOY_FAKE_NVML);
  unsetenv("CONVOY_FAKE_NVML_INIT");
  EXPECT_FALSE(nvml.usable());
  EXPECT_EQ(nvml.error(), "nvmlInit: Driver Not Loaded (9)");
}

TEST(ServeNvml, GpuReadingsInTritonsUnitsLabelledByUuid) {
  std::ostringstream log;
  DeviceMetrics d(fake_gpus(), log);
  EXPECT_EQ(d.gpus(), (std::vector<std::string>{kGpu0, kGpu1}));
  d.sample();  // the second reading: 2.5 J since the first
  const PrometheusText m = parse_prometheus(prometheus(d));
  ASSERT_TRUE(m.errors.empty()) << m.errors.front();
  const std::map<std::string, std::string> gpu0 = {{"gpu_uuid", kGpu0}}, gpu1 = {{"gpu_uuid", kGpu1}};
  EXPECT_DOUBLE_EQ(m.value("nv_gpu_utilization", gpu0), 0.37);
  EXPECT_DOUBLE_EQ(m.value("nv_gpu_utilization", gpu1), 1.0);
  EXPECT_DOUBLE_EQ(m.value("nv_gpu_memory_total_bytes", gpu0), 80.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(m.value("nv_gpu_memory_used_bytes", gpu1), 12.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(m.value("nv_gpu_power_usage", gpu0), 250.5);
  EXPECT_DOUBLE_EQ(m.value("nv_gpu_power_limit", gpu0), 700.0);
  EXPECT_DOUBLE_EQ(m.value("nv_energy_consumption", gpu0), 2.5);
  EXPECT_EQ(m.types.at("nv_energy_consumption"), "counter");
  EXPECT_EQ(m.types.at("nv_gpu_utilization"), "gauge");
  // GPU 1 has no power readings: no series, rather than a false 0; said once, not every sample.
  EXPECT_TRUE(std::isnan(m.value("nv_gpu_power_usage", gpu1)));
  EXPECT_TRUE(std::isnan(m.value("nv_energy_consumption", gpu1)));
  d.sample();
  EXPECT_EQ(count_of(log.str(), "nvmlDeviceGetPowerUsage: Not Supported (3)"), 1u) << log.str();
  EXPECT_NE(log.str().find("GPU metrics for " + kGpu0 + " (Fake GPU 0), " + kGpu1 + " (Fake GPU 1)"), std::string::npos)
      << log.str();
  EXPECT_DOUBLE_EQ(parse_prometheus(prometheus(d)).value("nv_energy_consumption", gpu0), 5.0);
  EXPECT_EQ(prometheus(d).find("nv_cpu"), std::string::npos);  // --allow-cpu-metrics=false
}

TEST(ServeNvml, OnlyTheGpusCudaSeesAreReported) {
  std::ostringstream log;
  DeviceMetricsOptions o = fake_gpus();
  o.gpu_uuids = std::vector<std::string>{kGpu1, "GPU-not-on-this-host"};
  DeviceMetrics d(o, log);
  EXPECT_EQ(d.gpus(), std::vector<std::string>{kGpu1});
  EXPECT_NE(log.str().find("no GPU metrics for GPU GPU-not-on-this-host: nvmlDeviceGetHandleByUUID: Not Found (6)"),
            std::string::npos)
      << log.str();
  EXPECT_EQ(prometheus(d).find(kGpu0), std::string::npos);
  // A model's cuda:N names its GPU by CUDA's order.
  EXPECT_EQ(d.gpu_uuid(0), kGpu1);
  EXPECT_EQ(d.gpu_uuid(1), "GPU-not-on-this-host");
  EXPECT_EQ(d.gpu_uuid(2), "");
  EXPECT_EQ(d.gpu_uuid(-1), "");
}

TEST(ServeNvml, TheSamplingThreadKeepsTheLastSampleFresh) {
  std::ostringstream log;
  DeviceMetricsOptions o = fake_gpus(/*cpu=*/true);
  o.interval = std::chrono::milliseconds(10);
  const std::map<std::string, std::string> gpu0 = {{"gpu_uuid", kGpu0}};
  const auto start = std::chrono::steady_clock::now();
  {
    DeviceMetrics d(o, log);
    double joules = 0;
    while (joules < 5.0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      joules = parse_prometheus(prometheus(d)).value("nv_energy_consumption", gpu0);
    }
    EXPECT_GE(joules, 5.0);  // two samples or more since the first, none asked for by the test
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));  // and it stops when asked
}

TEST(ServeMetricsText, BatchSizesAndLatenciesAreCumulativeHistograms) {
  MetricsRegistry registry;
  ModelMetrics& m = registry.get("resnet", 2);
  for (int64_t size : {1, 3, 8, 8}) m.record_batch(size, 0, 1000, 0);
  m.record_completion(true, 120'000);     // 120 us
  m.record_completion(true, 3'000'000);   // 3 ms
  m.record_completion(false, 9'000'000);  // failures are not in the latency histogram
  const PrometheusText t = parse_prometheus(registry.prometheus_text());
  ASSERT_TRUE(t.errors.empty()) << t.errors.front();
  auto at = [](const std::string& le) {
    return std::map<std::string, std::string>{{"model", "resnet"}, {"version", "2"}, {"le", le}};
  };
  const std::map<std::string, std::string> series = {{"model", "resnet"}, {"version", "2"}};
  EXPECT_EQ(t.types.at("convoy_inference_batch_size"), "histogram");
  EXPECT_EQ(t.value("convoy_inference_batch_size_bucket", at("1")), 1);
  EXPECT_EQ(t.value("convoy_inference_batch_size_bucket", at("2")), 1);
  EXPECT_EQ(t.value("convoy_inference_batch_size_bucket", at("4")), 2);
  EXPECT_EQ(t.value("convoy_inference_batch_size_bucket", at("8")), 4);
  EXPECT_EQ(t.value("convoy_inference_batch_size_bucket", at("+Inf")), 4);
  EXPECT_EQ(t.value("convoy_inference_batch_size_sum", series), 20);
  EXPECT_EQ(t.value("convoy_inference_batch_size_count", series), 4);
  EXPECT_EQ(t.value("convoy_inference_execution_duration_us", series), 4);  // 1000 ns a batch, each once
  EXPECT_EQ(t.value("convoy_inference_request_duration_us_bucket", at("100")), 0);
  EXPECT_EQ(t.value("convoy_inference_request_duration_us_bucket", at("150")), 1);
  EXPECT_EQ(t.value("convoy_inference_request_duration_us_bucket", at("3000")), 2);
  EXPECT_EQ(t.value("convoy_inference_request_duration_us_count", series), 2);
  EXPECT_EQ(t.value("convoy_inference_request_duration_us_sum", series), 3120);
  // The counter it breaks down agrees.
  EXPECT_EQ(t.value("nv_inference_request_duration_us", series), 3120);
}

TEST(ServeMetricsText, LoadedModelsSayTheirMemoryBudgetInstancesAndGpu) {
  MetricsRegistry registry;
  std::ostringstream log;
  DeviceMetricsOptions o;
  o.gpu = o.cpu = false;
  o.gpu_uuids = std::vector<std::string>{"GPU-aaaa", "GPU-bbbb"};
  DeviceMetrics devices(o, log);
  registry.set_device_metrics(&devices);
  ModelMetrics& gpu = registry.get("big", 1);
  gpu.memory_bytes = uint64_t{3} << 30;
  gpu.memory_budget_bytes = uint64_t{4} << 30;
  gpu.instance_count = 2;
  gpu.cuda_device = 1;
  ModelMetrics& cpu = registry.get("small", 3);
  cpu.instance_count = 1;
  registry.get("gone", 1);  // unloaded: no device
  const PrometheusText t = parse_prometheus(registry.prometheus_text());
  ASSERT_TRUE(t.errors.empty()) << t.errors.front();
  EXPECT_EQ(t.value("convoy_model_memory_budget_bytes", {{"model", "big"}}), double(uint64_t{4} << 30));
  EXPECT_EQ(t.value("convoy_model_instance_count", {{"model", "big"}}), 2);
  EXPECT_EQ(t.value("convoy_model_device_info", {{"model", "big"}, {"device", "cuda:1"}, {"gpu_uuid", "GPU-bbbb"}}), 1);
  EXPECT_EQ(t.value("convoy_model_device_info", {{"model", "small"}, {"device", "cpu"}, {"gpu_uuid", ""}}), 1);
  EXPECT_TRUE(std::isnan(t.value("convoy_model_device_info", {{"model", "gone"}})));
  EXPECT_EQ(t.value("convoy_model_instance_count", {{"model", "gone"}}), 0);
  EXPECT_TRUE(log.str().empty()) << log.str();  // nothing sampled, nothing said
}

TEST(ServeMetricsText, TheWholeTextWithDevicesParses) {
  MetricsRegistry registry;
  std::ostringstream log;
  DeviceMetrics devices(fake_gpus(/*cpu=*/true), log);
  registry.set_device_metrics(&devices);
  registry.get("a", 1).record_batch(2, 1, 1, 1);
  registry.get("b", 7).record_completion(true, 5000);
  const std::string text = registry.prometheus_text();
  const PrometheusText t = parse_prometheus(text);
  EXPECT_TRUE(t.errors.empty()) << t.errors.front() << "\n" << text;
  for (const char* name : {"nv_gpu_utilization", "nv_gpu_memory_total_bytes", "nv_gpu_memory_used_bytes",
                           "nv_gpu_power_usage", "nv_gpu_power_limit", "nv_energy_consumption", "nv_cpu_utilization",
                           "nv_cpu_memory_total_bytes", "nv_cpu_memory_used_bytes", "convoy_http_connections",
                           "nv_inference_request_success"})
    EXPECT_TRUE(t.types.count(name)) << name;
}

TEST(ServeMetricsText, ObservingTakesNoLockAndLosesNoCount) {
  ModelMetrics m;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&m, t] {
      for (int i = 0; i < 20000; ++i) m.request_duration_us.observe(static_cast<uint64_t>(t * 1000 + i % 7));
    });
  for (auto& t : threads) t.join();
  std::ostringstream out;
  m.request_duration_us.write(out, "x", "m=\"1\"");
  EXPECT_NE(out.str().find("x_count{m=\"1\"} 80000\n"), std::string::npos) << out.str();
}

}  // namespace
