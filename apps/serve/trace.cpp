#include "apps/serve/trace.h"

#include <fstream>
#include <iostream>
#include <limits>

#include <nlohmann/json.hpp>

#include "apps/serve/kserve_json.h"
#include "apps/serve/repository.h"
#include "engine/core/error.h"

namespace convoy::serve {

using json = nlohmann::json;

namespace {

// With log_frequency 0 Triton holds every trace until it exits; past this many bytes held they are
// written to trace_file at once instead, so that a trace rate of 1 cannot use up the memory.
constexpr size_t kMaxHeldBack = size_t{16} << 20;

[[noreturn]] void bad(const std::string& what) { throw RequestError(400, what); }

// `v` as an integer in [lo, hi] (digits, '-' first where lo < 0); else nullopt.
std::optional<int64_t> integer_in(const std::string& v, int64_t lo, int64_t hi) {
  const bool negative = !v.empty() && v[0] == '-';
  const std::string digits = negative ? v.substr(1) : v;
  if (digits.empty() || digits.size() > 10 || digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  const int64_t x = negative ? -std::stoll(digits) : std::stoll(digits);
  if (x < lo || x > hi) return std::nullopt;
  return x;
}

std::string range(int64_t lo, int64_t hi) { return "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]"; }

// A setting's one value as an integer in [lo, hi].
int64_t one_integer(const std::string& name, const std::vector<std::string>& values, int64_t lo, int64_t hi) {
  if (values.size() != 1) bad("expect only 1 value for '" + name + "'");
  const std::optional<int64_t> x = integer_in(values[0], lo, hi);
  if (!x) bad("Unable to parse '" + name + "', expected " + range(lo, hi) + ", got: " + values[0]);
  return *x;
}

}  // namespace

TraceSettings parse_trace_config(const std::vector<std::string>& options) {
  TraceSettings s;
  for (const std::string& option : options) {
    const size_t eq = option.find('='), comma = option.find(',');
    const bool triton = comma != std::string::npos && comma < eq;
    if (triton && option.substr(0, comma) != "triton")
      throw InputError("--trace-config " + option + ": convoy serve traces in Triton's own mode only (triton,...)");
    if (eq == std::string::npos) throw InputError("--trace-config " + option + ": expected [triton,]SETTING=VALUE");
    const std::string name = option.substr(triton ? comma + 1 : 0, eq - (triton ? comma + 1 : 0));
    const std::string value = option.substr(eq + 1);
    auto integer = [&](int64_t lo, int64_t hi) {
      const std::optional<int64_t> x = integer_in(value, lo, hi);
      if (!x) throw InputError("--trace-config " + option + ": expected " + range(lo, hi));
      return *x;
    };
    if (name == "level" && (value == "TIMESTAMPS" || value == "OFF"))
      s.timestamps = value == "TIMESTAMPS";
    else if (name == "level")
      throw InputError("--trace-config " + option + ": convoy serve traces levels OFF and TIMESTAMPS");
    else if (name == "rate")
      s.rate = static_cast<uint32_t>(integer(0, std::numeric_limits<uint32_t>::max()));
    else if (name == "count")
      s.count = static_cast<int32_t>(integer(-1, std::numeric_limits<int32_t>::max()));
    else if (name == "log-frequency")
      s.log_frequency = static_cast<uint32_t>(integer(0, std::numeric_limits<uint32_t>::max()));
    else if (name == "file")
      s.file = value;
    else if (name != "mode" || value != "triton")
      throw InputError("--trace-config " + option +
                       ": expected level, rate, count, mode=triton, triton,file or triton,log-frequency");
  }
  return s;
}

TraceUpdate parse_trace_update(
    const std::vector<std::pair<std::string, std::optional<std::vector<std::string>>>>& settings) {
  TraceUpdate u;
  for (const auto& [name, values] : settings) {
    if (name == "trace_file")  // as Triton: the server is not told over the network where to write
      throw RequestError(501, "trace file location can not be updated through network protocol");
    if (name == "trace_mode") {  // Triton's response names it; sending it back as it was changes nothing
      if (values && *values != std::vector<std::string>{"triton"})
        bad("trace_mode: convoy serve traces in Triton's own mode only ('triton')");
      continue;
    }
    if (name == "trace_level") {
      if (!values) {
        u.timestamps.emplace();
        continue;
      }
      if (values->empty()) bad("trace_level: give [\"OFF\"] or [\"TIMESTAMPS\"]");
      bool timestamps = false;
      for (const std::string& level : *values) {
        if (level == "OFF" && values->size() > 1) bad("Expect only one trace level 'OFF' is specified");
        if (level == "TENSORS")
          bad("trace_level TENSORS is not supported by convoy serve (OFF and TIMESTAMPS are)");
        if (level != "OFF" && level != "TIMESTAMPS")
          bad("trace_level: unknown level '" + level + "' (OFF, TIMESTAMPS)");
        timestamps = level == "TIMESTAMPS";
      }
      u.timestamps = timestamps;
    } else if (name == "trace_rate") {
      if (!values) u.rate.emplace();
      else u.rate = static_cast<uint32_t>(one_integer(name, *values, 0, std::numeric_limits<uint32_t>::max()));
    } else if (name == "trace_count") {
      if (!values) u.count.emplace();
      else u.count = static_cast<int32_t>(one_integer(name, *values, -1, std::numeric_limits<int32_t>::max()));
    } else if (name == "log_frequency") {
      if (!values) u.log_frequency.emplace();
      else u.log_frequency = static_cast<uint32_t>(one_integer(name, *values, 0, std::numeric_limits<uint32_t>::max()));
    } else {
      bad("unknown trace setting '" + name + "' (trace_level, trace_rate, trace_count, log_frequency)");
    }
  }
  return u;
}

std::vector<std::pair<std::string, std::vector<std::string>>> trace_setting_values(const TraceSettings& s) {
  return {{"trace_level", {s.timestamps ? "TIMESTAMPS" : "OFF"}},
          {"trace_rate", {std::to_string(s.rate)}},
          {"trace_count", {std::to_string(s.count)}},
          {"log_frequency", {std::to_string(s.log_frequency)}},
          {"trace_file", {s.file}},
          {"trace_mode", {"triton"}}};
}

void check_trace_model(const ModelRepository& repository, const std::string& model) {
  if (!model.empty() && repository.ready_versions(model).empty())
    throw RequestError(400, "Request for unknown model : " + model);
}

std::string trace_setting_json(RequestTracer& tracer, const ModelRepository& repository, const std::string& model,
                               const std::string* body) {
  check_trace_model(repository, model);
  if (body && body->find_first_not_of(" \t\r\n") != std::string::npos) {  // an empty body changes nothing
    const json doc = json::parse(*body, nullptr, false);
    if (doc.is_discarded()) bad("malformed JSON in the request body");
    if (!doc.is_object()) bad("the trace setting request must be a JSON object, got " + std::string(doc.type_name()));
    std::vector<std::pair<std::string, std::optional<std::vector<std::string>>>> settings;
    for (const auto& [name, value] : doc.items()) {
      std::optional<std::vector<std::string>> values;
      if (value.is_string()) {
        values = std::vector<std::string>{value.get<std::string>()};
      } else if (value.is_array() && name == "trace_level") {
        values.emplace();
        for (const json& v : value) {
          if (!v.is_string()) bad("trace_level must be an array of strings");
          values->push_back(v.get<std::string>());
        }
      } else if (!value.is_null()) {
        bad("'" + name + "' must be " + (name == "trace_level" ? "an array of strings" : "a string") + " or null, got " +
            value.dump());
      }
      settings.emplace_back(name, std::move(values));
    }
    tracer.update(model, parse_trace_update(settings));
  }
  json out = json::object();
  for (const auto& [name, values] : trace_setting_values(tracer.settings(model)))
    out[name] = name == "trace_level" ? json(values) : json(values.front());
  return out.dump();
}

// ---- the tracer ------------------------------------------------------------------------------

// The trace file: trace_file itself, a JSON array opened at its first write and closed at exit,
// and the indexed files trace_file.0, .1, ... (log_frequency), each an array of its own.
struct RequestTracer::File {
  explicit File(std::string p) : path(std::move(p)) {}
  ~File() {
    if (main.is_open()) main << "]\n";
  }
  void append(const std::string& records) {
    std::lock_guard lock(mutex);
    if (!main.is_open()) {
      main.open(path, std::ios::trunc);
      main << "[";
    } else {
      main << ",";
    }
    main << records;
    main.flush();
    if (!main) std::cerr << "convoy serve: cannot write the trace file " << path << std::endl;
  }
  void write_indexed(const std::string& records) {
    std::string name;
    {
      std::lock_guard lock(mutex);
      name = path + "." + std::to_string(next_index++);
    }
    std::ofstream f(name, std::ios::trunc);
    f << "[" << records << "]\n";
    if (!f) std::cerr << "convoy serve: cannot write the trace file " << name << std::endl;
  }
  const std::string path;
  std::mutex mutex;
  std::ofstream main;
  uint64_t next_index = 0;
};

// One level's settings in effect and what it sampled: Triton's TraceSetting.
struct RequestTracer::Level {
  Level(const TraceSettings& s, std::shared_ptr<File> f) : settings(s), file(std::move(f)) {}
  ~Level() {  // the traces still held back (an update replaced these settings, or the server stops)
    if (held == 0) return;
    if (settings.log_frequency != 0)
      file->write_indexed(buffer);
    else
      file->append(buffer);
  }
  bool traces() const { return settings.timestamps && settings.rate != 0 && !settings.file.empty(); }
  void write(const std::string& records) {
    std::string out;
    bool indexed = false;
    {
      std::lock_guard lock(mutex);
      if (held != 0) buffer += ",";
      buffer += records;
      ++held;
      ++collected;
      // Triton's rule: every log_frequency traces, and when trace_count ran out, to an indexed file.
      indexed = (settings.count == 0 && collected == created) ||
                (settings.log_frequency != 0 && held >= settings.log_frequency);
      if (indexed || (settings.log_frequency == 0 && buffer.size() >= kMaxHeldBack)) {
        out.swap(buffer);
        held = 0;
      }
    }
    if (indexed)
      file->write_indexed(out);
    else if (!out.empty())
      file->append(out);
  }

  std::mutex mutex;
  TraceSettings settings;  // count: the traces left
  std::shared_ptr<File> file;
  uint64_t seen = 0, created = 0, collected = 0, held = 0;
  std::string buffer;  // `held` traces' records, comma-separated
};

struct RequestTracer::Overrides {
  std::optional<bool> timestamps;
  std::optional<uint32_t> rate;
  std::optional<int32_t> count;
  std::optional<uint32_t> log_frequency;
  bool any() const { return timestamps || rate || count || log_frequency; }
};

RequestTracer::RequestTracer() : global_own_(std::make_unique<Overrides>()) { configure(TraceSettings{}); }
RequestTracer::~RequestTracer() = default;

std::shared_ptr<RequestTracer::Level> RequestTracer::make_level(const TraceSettings& fallback, const Overrides& own) const {
  TraceSettings s = fallback;
  s.timestamps = own.timestamps.value_or(s.timestamps);
  s.rate = own.rate.value_or(s.rate);
  s.count = own.count.value_or(s.count);
  s.log_frequency = own.log_frequency.value_or(s.log_frequency);
  return std::make_shared<Level>(s, file_);
}

void RequestTracer::configure(const TraceSettings& startup) {
  if (startup.timestamps && startup.file.empty())
    throw InputError("--trace-config level=TIMESTAMPS needs a trace file: --trace-config triton,file=PATH");
  if (startup.timestamps && startup.rate == 0) throw InputError("--trace-config rate must be 1 or more");
  std::lock_guard lock(mutex_);
  startup_ = startup;
  file_ = std::make_shared<File>(startup.file);
  *global_own_ = Overrides{};
  global_ = make_level(startup_, *global_own_);
  models_.clear();
  tracing_ = global_->traces();
}

TraceSettings RequestTracer::settings(const std::string& model) const {
  std::shared_ptr<Level> level;
  {
    std::lock_guard lock(mutex_);
    auto it = models_.find(model);
    level = it == models_.end() ? global_ : it->second.second;
  }
  std::lock_guard lock(level->mutex);
  return level->settings;
}

namespace {

TraceSettings snapshot(RequestTracer::Level& level) {
  std::lock_guard lock(level.mutex);
  return level.settings;
}

}  // namespace

TraceSettings RequestTracer::update(const std::string& model, const TraceUpdate& u) {
  auto apply = [](auto& own, const auto& change) {
    if (change) own = *change;  // a cleared change resets `own`: it follows the level above
  };
  std::lock_guard lock(mutex_);
  const auto found = models_.find(model);
  const bool model_own = !model.empty() && found != models_.end();
  Overrides own = model.empty() ? *global_own_ : model_own ? *found->second.first : Overrides{};
  // A count set before goes on as what is left of it, as Triton's does.
  if (own.count) own.count = snapshot(model_own ? *found->second.second : *global_).count;
  apply(own.timestamps, u.timestamps);
  apply(own.rate, u.rate);
  apply(own.count, u.count);
  apply(own.log_frequency, u.log_frequency);
  std::shared_ptr<Level> level = make_level(model.empty() ? startup_ : snapshot(*global_), own);
  const TraceSettings result = level->settings;
  if (result.timestamps && result.file.empty())
    bad("Attempting to set invalid trace setting: trace file name is not given (start convoy serve with "
        "--trace-config triton,file=PATH)");
  if (result.timestamps && result.rate == 0) bad("Attempting to set invalid trace setting: sample rate must be non-zero");
  if (model.empty()) {
    *global_own_ = own;
    global_ = std::move(level);
    // The models' settings follow the server's new ones where they have none of their own.
    for (auto& [name, entry] : models_) {
      if (entry.first->count) entry.first->count = snapshot(*entry.second).count;
      entry.second = make_level(result, *entry.first);
    }
  } else if (own.any()) {
    models_[model] = {std::make_unique<Overrides>(own), std::move(level)};
  } else {
    models_.erase(model);  // follows the server's settings again
  }
  bool tracing = global_->traces();
  for (const auto& [name, entry] : models_) tracing = tracing || entry.second->traces();
  tracing_ = tracing;
  return result;
}

std::optional<RequestTracer::Trace> RequestTracer::sample(const std::string& model) {
  if (!tracing_.load(std::memory_order_relaxed)) return std::nullopt;  // the usual case: one load
  std::shared_ptr<Level> level;
  {
    std::lock_guard lock(mutex_);
    auto it = models_.find(model);
    level = it == models_.end() ? global_ : it->second.second;
  }
  {
    std::lock_guard lock(level->mutex);
    if (!level->traces() || level->settings.count == 0) return std::nullopt;
    if (++level->seen % level->settings.rate != 0) return std::nullopt;
    if (level->settings.count > 0) --level->settings.count;
    ++level->created;
  }
  Trace trace;
  trace.level_ = std::move(level);
  trace.id_ = ++next_id_;
  return trace;
}

void RequestTracer::Trace::write(const std::string& model, int64_t version, const std::string& request_id,
                                 const std::vector<std::pair<const char*, Clock::time_point>>& timestamps) const {
  const std::string id = std::to_string(id_);
  json head = {{"id", id_}, {"model_name", model}, {"model_version", version}};
  if (!request_id.empty()) head["request_id"] = request_id;
  std::string records = head.dump();
  for (const auto& [name, at] : timestamps) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
    records += ",{\"id\":" + id + ",\"timestamps\":[{\"name\":\"" + name + "\",\"ns\":" + std::to_string(ns) + "}]}";
  }
  level_->write(records);
}

}  // namespace convoy::serve
