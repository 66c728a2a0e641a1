// Triton's trace and logging extensions in `convoy serve`, on their own: trace settings that
// follow the server's as Triton's TraceManager's do (its own test's sequence), refusals, sampling
// by rate and count, the trace files in Triton's records (trace_file at exit, trace_file.N every
// log_frequency traces and when trace_count runs out), --trace-config; the log's settings, its
// severities, its formats and whole lines from several threads; both through the HTTP routes.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "apps/serve/kserve_json.h"
#include "apps/serve/log_settings.h"
#include "apps/serve/routes.h"
#include "apps/serve/trace.h"
#include "engine/core/error.h"
#include "tests/serve/router_fixture.h"
#include "tests/serve/serve_harness.h"
#include "tests/temp_dir.h"

namespace {

using json = nlohmann::json;
using namespace convoy::serve;
using Values = std::vector<std::pair<std::string, std::optional<std::vector<std::string>>>>;

// The settings as Triton's HTTP JSON gives them, for comparing with its own test's expectations.
json as_json(const TraceSettings& s) {
  json out;
  for (const auto& [name, values] : trace_setting_values(s))
    out[name] = name == "trace_level" ? json(values) : json(values.front());
  return out;
}

unsigned refusal(const Values& values) {
  try {
    parse_trace_update(values);
  } catch (const RequestError& e) {
    return e.status();
  }
  return 0;
}

// Triton's L0_trace test_http_clear_settings, step by step, on the tracer itself.
TEST(ServeTrace, ModelSettingsFollowTheServersUntilSetAndAfterCleared) {
  RequestTracer tracer;
  TraceSettings startup;
  startup.timestamps = true;
  startup.rate = 1;
  startup.file = "global_unittest.log";
  tracer.configure(startup);
  const json initial = json::parse(R"({"trace_file": "global_unittest.log", "trace_level": ["TIMESTAMPS"],
      "trace_rate": "1", "trace_count": "-1", "log_frequency": "0", "trace_mode": "triton"})");
  EXPECT_EQ(as_json(tracer.settings("simple")), initial);
  EXPECT_EQ(as_json(tracer.settings("")), initial);

  tracer.update("simple", parse_trace_update({{"trace_rate", {{"12"}}}, {"log_frequency", {{"34"}}}}));
  tracer.update("", parse_trace_update({{"trace_rate", {{"56"}}}, {"trace_count", {{"78"}}}, {"trace_level", {{"OFF"}}}}));
  const json global = as_json(tracer.update("", parse_trace_update({{"trace_rate", std::nullopt}, {"trace_count", std::nullopt}})));
  json want = initial;
  want["trace_level"] = {"OFF"};
  EXPECT_EQ(global, want);
  json model = want;
  model["trace_rate"] = "12";
  model["log_frequency"] = "34";
  EXPECT_EQ(as_json(tracer.settings("simple")), model);
  model["trace_rate"] = "1";
  EXPECT_EQ(as_json(tracer.update("simple", parse_trace_update({{"trace_rate", std::nullopt}, {"trace_level", std::nullopt}}))),
            model);
  EXPECT_EQ(as_json(tracer.settings("")), want);
  // With nothing of its own left, the model follows the server's settings entirely.
  EXPECT_EQ(as_json(tracer.update("simple", parse_trace_update({{"log_frequency", std::nullopt}}))), want);
  EXPECT_EQ(as_json(tracer.settings("other")), want);
}

TEST(ServeTrace, RefusalsNameTheSetting) {
  EXPECT_EQ(refusal({{"trace_file", {{"elsewhere.json"}}}}), 501u);  // Triton's: not over the network
  EXPECT_EQ(refusal({{"trace_level", {{"TENSORS"}}}}), 400u);       // not supported: said, not ignored
  EXPECT_EQ(refusal({{"trace_level", {{"OFF", "TIMESTAMPS"}}}}), 400u);
  EXPECT_EQ(refusal({{"trace_level", {{"ALL"}}}}), 400u);
  EXPECT_EQ(refusal({{"trace_rate", {{"1.5"}}}}), 400u);
  EXPECT_EQ(refusal({{"trace_rate", {{"-1"}}}}), 400u);
  EXPECT_EQ(refusal({{"trace_rate", {{"1", "2"}}}}), 400u);
  EXPECT_EQ(refusal({{"trace_rate", {{"4294967296"}}}}), 400u);
  EXPECT_EQ(refusal({{"trace_count", {{"-2"}}}}), 400u);
  EXPECT_EQ(refusal({{"log_frequency", {{"often"}}}}), 400u);
  EXPECT_EQ(refusal({{"trace_rates", {{"1"}}}}), 400u);
  EXPECT_EQ(refusal({{"trace_mode", {{"opentelemetry"}}}}), 400u);
  EXPECT_EQ(refusal({{"trace_mode", {{"triton"}}}, {"trace_count", {{"-1"}}}, {"trace_rate", {{"4294967295"}}}}), 0u);
  try {
    parse_trace_update({{"trace_level", {{"TENSORS"}}}});
  } catch (const RequestError& e) {
    EXPECT_NE(std::string(e.what()).find("TENSORS is not supported"), std::string::npos) << e.what();
  }
  // Tracing needs the trace file, given at start-up, and a rate.
  RequestTracer tracer;
  try {
    tracer.update("", parse_trace_update({{"trace_level", {{"TIMESTAMPS"}}}}));
    ADD_FAILURE() << "traced without a trace file";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status(), 400u);
    EXPECT_NE(std::string(e.what()).find("trace file name is not given"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(tracer.settings("").timestamps);  // the refused update changed nothing
  EXPECT_FALSE(tracer.sample("m"));
}

TEST(ServeTrace, TraceConfigIsTritons) {
  const TraceSettings s = parse_trace_config(
      {"level=TIMESTAMPS", "rate=5", "count=7", "mode=triton", "triton,file=/tmp/t.json", "triton,log-frequency=9"});
  EXPECT_TRUE(s.timestamps);
  EXPECT_EQ(s.rate, 5u);
  EXPECT_EQ(s.count, 7);
  EXPECT_EQ(s.file, "/tmp/t.json");
  EXPECT_EQ(s.log_frequency, 9u);
  for (const char* bad : {"level=TENSORS", "rate=x", "count=-2", "opentelemetry,url=x", "mode=opentelemetry",
                          "triton,colour=blue", "rate"})
    EXPECT_THROW(parse_trace_config({bad}), convoy::InputError) << bad;
  RequestTracer tracer;
  EXPECT_THROW(tracer.configure(parse_trace_config({"level=TIMESTAMPS"})), convoy::InputError);  // no file
}

json read_json(const std::filesystem::path& p) { return json::parse(convoy::testing::read_text(p)); }

// Writes a trace of model "m" version 3 with the request's id `rid` and two timestamps.
void write_trace(const RequestTracer::Trace& trace, const std::string& rid) {
  const auto t0 = RequestTracer::Clock::now();
  trace.write("m", 3, rid, {{"REQUEST_START", t0}, {"REQUEST_END", t0 + std::chrono::microseconds(5)}});
}

TEST(ServeTrace, SampledByRateAndCountIntoTritonsRecords) {
  convoy::testing::TempDir dir;
  const std::string file = (dir / "trace.json").string();
  {
    RequestTracer tracer;
    tracer.configure(parse_trace_config({"level=TIMESTAMPS", "rate=2", "count=3", "triton,file=" + file}));
    std::vector<int> sampled;
    std::vector<RequestTracer::Trace> traces;
    for (int i = 1; i <= 10; ++i)
      if (auto t = tracer.sample("m")) {
        sampled.push_back(i);
        traces.push_back(*t);
      }
    EXPECT_EQ(sampled, (std::vector<int>{2, 4, 6}));  // every 2nd, 3 of them
    EXPECT_EQ(tracer.settings("").count, 0);
    for (size_t i = 0; i < traces.size(); ++i) write_trace(traces[i], i == 1 ? "" : "r" + std::to_string(i));
    // Triton's rule: once trace_count runs out, the traces go to an indexed file.
    const json got = read_json(file + ".0");
    ASSERT_EQ(got.size(), 9u) << got.dump();
    EXPECT_EQ(got[0], json::parse(R"({"id": 1, "model_name": "m", "model_version": 3, "request_id": "r0"})"));
    EXPECT_EQ(got[1].at("id"), 1);
    EXPECT_EQ(got[1].at("timestamps").at(0).at("name"), "REQUEST_START");
    EXPECT_EQ(got[2].at("timestamps").at(0).at("ns").get<int64_t>() - got[1].at("timestamps").at(0).at("ns").get<int64_t>(),
              5000);
    EXPECT_FALSE(got[3].contains("request_id")) << got[3];  // no id, none written
    EXPECT_EQ(got[6].at("id"), 3);

    // log_frequency 2: every two traces an indexed file; what is left when the settings go, one more.
    tracer.update("", parse_trace_update({{"trace_count", {{"-1"}}}, {"log_frequency", {{"2"}}}, {"trace_rate", {{"1"}}}}));
    for (int i = 0; i < 5; ++i) write_trace(*tracer.sample("m"), "");
    EXPECT_EQ(read_json(file + ".1").size(), 6u);
    EXPECT_EQ(read_json(file + ".2").size(), 6u);
    EXPECT_FALSE(std::filesystem::exists(file + ".3"));
    // log_frequency 0 again: the traces are held for trace_file itself, written at exit.
    tracer.update("", parse_trace_update({{"log_frequency", std::nullopt}}));
    EXPECT_EQ(read_json(file + ".3").size(), 3u);
    for (int i = 0; i < 2; ++i) write_trace(*tracer.sample("m"), "x");
    EXPECT_FALSE(std::filesystem::exists(file));
  }
  const json main = read_json(file);
  ASSERT_EQ(main.size(), 6u) << main.dump();
  EXPECT_EQ(main[0].at("request_id"), "x");
}

TEST(ServeTrace, AModelsOwnSettingsSampleItsRequestsAlone) {
  convoy::testing::TempDir dir;
  RequestTracer tracer;
  tracer.configure(parse_trace_config({"triton,file=" + (dir / "t.json").string()}));  // level OFF
  EXPECT_FALSE(tracer.sample("a"));
  tracer.update("a", parse_trace_update({{"trace_level", {{"TIMESTAMPS"}}}, {"trace_rate", {{"1"}}}}));
  EXPECT_TRUE(tracer.sample("a"));
  EXPECT_FALSE(tracer.sample("b"));
  tracer.update("a", parse_trace_update({{"trace_level", std::nullopt}}));
  EXPECT_FALSE(tracer.sample("a"));
}

// ---- the log ---------------------------------------------------------------------------------

struct LogFile {
  convoy::testing::TempDir dir;
  std::filesystem::path path = dir / "serve.log";
  std::string text() const { return convoy::testing::read_text(path); }
};

TEST(ServeLogSettings, SeveritiesFormatsAndRequestLinesFollowTheSettings) {
  LogFile f;
  ServeLog log;
  LogSettings startup;
  startup.file = f.path.string();
  log.configure(startup);
  log.message(LogSeverity::info, "one");
  log.request_line("{\"r\": 1}");  // verbose level 0: not written
  log.update({{"log_info", false}, {"log_verbose_level", int64_t{1}}});
  log.message(LogSeverity::info, "two");
  log.message(LogSeverity::error, "three");
  log.request_line("{\"r\": 2}");
  log.update({{"log_format", std::string("ISO8601")}});
  log.message(LogSeverity::warning, "four");
  const std::string text = f.text();
  EXPECT_EQ(text.rfind("one\nthree\n{\"r\": 2}\n2", 0), 0u) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex("\n[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z W " +
                                                 std::to_string(getpid()) + " convoy\\] four\n$")))
      << text;
}

TEST(ServeLogSettings, AnUpdateIsAppliedWholeOrNotAtAll) {
  ServeLog log;
  auto status = [&](const std::vector<std::pair<std::string, LogValue>>& settings) {
    try {
      log.update(settings);
    } catch (const RequestError& e) {
      return e.status();
    }
    return 200u;
  };
  EXPECT_EQ(status({{"log_info", false}, {"log_format", std::string("fancy")}}), 400u);
  EXPECT_TRUE(log.settings().info);
  EXPECT_EQ(status({{"log_file", std::string("/tmp/x.log")}}), 501u);
  EXPECT_EQ(status({{"log_file", std::monostate{}}}), 200u);  // null: changes nothing, as Triton
  EXPECT_EQ(status({{"log_info", int64_t{1}}}), 400u);
  EXPECT_EQ(status({{"log_verbose_level", int64_t{-1}}}), 400u);
  EXPECT_EQ(status({{"log_verbose_level", true}}), 400u);
  EXPECT_EQ(status({{"log_level", int64_t{1}}}), 400u);
  EXPECT_EQ(status({{"log_warning", false}, {"log_error", false}, {"log_verbose_level", int64_t{3}}}), 200u);
  const LogSettings s = log.settings();
  EXPECT_FALSE(s.warning);
  EXPECT_FALSE(s.error);
  EXPECT_EQ(s.verbose_level, 3u);
  EXPECT_TRUE(log.verbose(3));
  EXPECT_FALSE(log.verbose(4));
}

// std::cerr is shared by every thread: each thread's lines come out whole.
TEST(ServeLogSettings, LinesFromSeveralThreadsStayWhole) {
  LogFile f;
  ServeLog log;
  LogSettings startup;
  startup.file = f.path.string();
  log.configure(startup);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&log, t] {
      for (int i = 0; i < 200; ++i) log.stream(LogSeverity::warning) << "thread " << t << " line " << i << std::endl;
    });
  for (std::thread& t : threads) t.join();
  std::istringstream lines(f.text());
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    EXPECT_TRUE(std::regex_match(line, std::regex("thread [0-3] line [0-9]+"))) << line;
    ++count;
  }
  EXPECT_EQ(count, 800);
}

// ---- through the router ------------------------------------------------------------------------

using ServeSettingsRoutes = convoy::testing::RouterTest;

TEST_F(ServeSettingsRoutes, LoggingAndTraceSettingAnswerAsTritons) {
  HttpReply r = call("GET", "/v2/logging");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(json::parse(r.body), json::parse(R"({"log_file": "", "log_info": true, "log_warning": true,
      "log_error": true, "log_verbose_level": 0, "log_format": "default"})"));
  r = call("POST", "/v2/logging", R"({"log_verbose_level": 1, "log_info": null})");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(json::parse(r.body).at("log_verbose_level"), 1);
  EXPECT_TRUE(metrics_.log().verbose(1));
  EXPECT_EQ(call("POST", "/v2/logging", "{").status, 400u);
  EXPECT_EQ(call("POST", "/v2/logging", "[1]").status, 400u);
  EXPECT_EQ(call("POST", "/v2/logging", R"({"log_verbose_level": 1.5})").status, 400u);
  EXPECT_EQ(call("POST", "/v2/logging", R"({"log_error": "yes"})").status, 400u);
  EXPECT_EQ(call("POST", "/v2/logging", R"({"log_file": "/tmp/elsewhere"})").status, 501u);
  EXPECT_EQ(call("POST", "/v2/logging", "").status, 200u);  // empty: read only

  r = call("GET", "/v2/trace/setting");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(json::parse(r.body), json::parse(R"({"trace_file": "", "trace_level": ["OFF"], "trace_rate": "1000",
      "trace_count": "-1", "log_frequency": "0", "trace_mode": "triton"})"));
  r = call("POST", "/v2/trace/setting", R"({"trace_rate": "10", "trace_count": "5"})");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(json::parse(r.body).at("trace_rate"), "10");
  EXPECT_EQ(call("POST", "/v2/trace/setting", R"({"trace_rate": 10})").status, 400u);  // Triton's values are strings
  EXPECT_EQ(call("POST", "/v2/trace/setting", R"({"trace_level": "TIMESTAMPS"})").status, 400u);
  EXPECT_EQ(call("POST", "/v2/trace/setting", R"({"trace_level": ["TIMESTAMPS"]})").status, 400u);  // no file
  EXPECT_EQ(call("POST", "/v2/trace/setting", R"({"trace_file": "x"})").status, 501u);
  r = call("GET", "/v2/models/nope/trace/setting");
  EXPECT_EQ(r.status, 400u);
  EXPECT_EQ(json::parse(r.body).at("error"), "Request for unknown model : nope");
}

}  // namespace
