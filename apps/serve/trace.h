#pragma once
// Triton's trace extension: which requests are traced, for every model or for one (GET/POST
// /v2[/models/<m>]/trace/setting, gRPC TraceSetting), and the trace file their timestamps go to,
// in Triton's JSON: [{"id": 1, "model_name": ..., "model_version": 1}, {"id": 1, "timestamps":
// [{"name": "REQUEST_START", "ns": ...}]}, ...], steady-clock nanoseconds as Triton's.
// Settings behave as Triton's TraceManager's: a model's unset settings follow the server's, the
// server's unset ones the start-up values (--trace-config); an update replaces a level's settings,
// and the traces sampled under the old ones are still written under them.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace convoy::serve {

class ModelRepository;

struct TraceSettings {
  bool timestamps = false;     // trace_level: ["TIMESTAMPS"] or ["OFF"]
  uint32_t rate = 1000;        // trace_rate: one request of every `rate` is traced
  int32_t count = -1;          // trace_count: traces left to take (-1: no limit)
  uint32_t log_frequency = 0;  // traces per indexed file (trace_file.0, .1, ...); 0: all in trace_file at exit
  std::string file;            // trace_file: set at start-up only, as Triton
};

// The start-up settings from --trace-config options, as Triton's: level=OFF|TIMESTAMPS, rate=N,
// count=N, mode=triton, triton,file=PATH, triton,log-frequency=N. InputError naming a bad one.
TraceSettings parse_trace_config(const std::vector<std::string>& options);

// A change of settings. Each field: nullopt leaves it; a value sets it; an empty value (JSON
// null, an empty gRPC value list) clears it, so that it follows the level above again.
struct TraceUpdate {
  template <class T>
  using Change = std::optional<std::optional<T>>;
  Change<bool> timestamps;
  Change<uint32_t> rate;
  Change<int32_t> count;
  Change<uint32_t> log_frequency;
};

// A setting as the protocols send it: its name and its strings (nullopt: cleared), as both
// Triton's JSON ("12", ["TIMESTAMPS"], null) and its gRPC SettingValue carry them. RequestError
// naming what is wrong: an unknown setting, a value that is not one (400); trace_file (501).
TraceUpdate parse_trace_update(const std::vector<std::pair<std::string, std::optional<std::vector<std::string>>>>& settings);

// The settings as the protocols return them: name and strings, trace_level the list of levels.
std::vector<std::pair<std::string, std::vector<std::string>>> trace_setting_values(const TraceSettings& s);

class RequestTracer {
 public:
  using Clock = std::chrono::steady_clock;
  struct Level;  // one level's settings and what it sampled (trace.cpp)

  // A request chosen for tracing, which writes its trace once it has its timestamps.
  class Trace {
   public:
    // Writes the trace's records: the request's model, version and id (left out when empty),
    // then each (name, time) in order.
    void write(const std::string& model, int64_t version, const std::string& request_id,
               const std::vector<std::pair<const char*, Clock::time_point>>& timestamps) const;

   private:
    friend class RequestTracer;
    std::shared_ptr<Level> level_;
    uint64_t id_ = 0;
  };

  // Tracing off until configure() says otherwise.
  RequestTracer();
  ~RequestTracer();  // writes what is held back and closes the trace file
  RequestTracer(const RequestTracer&) = delete;
  RequestTracer& operator=(const RequestTracer&) = delete;

  // The start-up settings (--trace-config), before any request. InputError when they cannot trace
  // (TIMESTAMPS without a file, a rate of 0).
  void configure(const TraceSettings& startup);
  // The settings a request of `model` is sampled under ("": the server's).
  TraceSettings settings(const std::string& model) const;
  // Changes the server's settings (model "") or a model's; RequestError(400) when the result
  // would trace and cannot (no trace file, a rate of 0). Returns the settings after the change.
  TraceSettings update(const std::string& model, const TraceUpdate& update);
  // At a request's start: whether it is traced, under the settings of its model.
  std::optional<Trace> sample(const std::string& model);

 private:
  struct Overrides;  // a level's settings that are set, not followed
  std::shared_ptr<Level> make_level(const TraceSettings& fallback, const Overrides& own) const;

  struct File;
  std::shared_ptr<File> file_;
  mutable std::mutex mutex_;
  TraceSettings startup_;
  std::unique_ptr<Overrides> global_own_;
  std::shared_ptr<Level> global_;
  std::map<std::string, std::pair<std::unique_ptr<Overrides>, std::shared_ptr<Level>>> models_;
  std::atomic<bool> tracing_{false};  // some level traces: sample() looks further
  std::atomic<uint64_t> next_id_{0};
};

// GET (body null) or POST of /v2[/models/<model>]/trace/setting: the settings (after the update)
// as Triton's JSON. RequestError: 400 for an unknown model or a bad body, 501 for trace_file.
std::string trace_setting_json(RequestTracer& tracer, const ModelRepository& repository, const std::string& model,
                               const std::string* body);
// RequestError(400) when `model` is not empty and has no ready version (Triton's message).
void check_trace_model(const ModelRepository& repository, const std::string& model);

}  // namespace convoy::serve
