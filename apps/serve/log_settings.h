#pragma once
// What `convoy serve` logs, under Triton's logging extension (GET/POST /v2/logging, gRPC
// LogSettings): messages of three severities (info: start-up, models ready or unloaded, the stop;
// warning: notices such as a fallback, and whatever other code writes to std::cerr while serving;
// error: a model that cannot load, a failed repository poll) on stderr, and at verbose level 1 or
// more one JSON line per HTTP request on stdout (--log-requests); all to log_file instead when
// one is set at start-up. log_format "default" writes each line as it is; "ISO8601" heads it as
// Triton's ISO8601 format does: "2026-12-03T10:04:05Z I 1234 convoy] ".
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

namespace convoy::serve {

enum class LogSeverity { info, warning, error, verbose };

struct LogSettings {
  std::string file;  // empty: stderr and stdout
  bool info = true;
  bool warning = true;
  bool error = true;
  uint32_t verbose_level = 0;  // 1 and more: the request lines
  std::string format = "default";  // or "ISO8601"
};

// A setting as the protocols send it: null (JSON null, a gRPC value with no choice), a bool, an
// integer or a string.
using LogValue = std::variant<std::monostate, bool, int64_t, std::string>;

class ServeLog {
 public:
  ServeLog();
  ~ServeLog();
  ServeLog(const ServeLog&) = delete;
  ServeLog& operator=(const ServeLog&) = delete;

  // The start-up settings (--log-file, --log-info, ...): InputError when the file cannot be opened
  // for appending or the format is not one.
  void configure(const LogSettings& startup);
  LogSettings settings() const;
  // Applies the settings of a POST /v2/logging or LogSettings call, all or none; returns them after.
  // RequestError: 400 for an unknown setting or a value of the wrong type, 501 for log_file.
  LogSettings update(const std::vector<std::pair<std::string, LogValue>>& settings);

  // One message line (no newline), written when its severity is on.
  void message(LogSeverity severity, std::string_view line);
  bool verbose(uint32_t level) const { return verbose_level_.load(std::memory_order_relaxed) >= level; }
  // A request line (--log-requests), written at verbose level 1 and more.
  void request_line(std::string_view json);
  // A stream whose every line is a message of `severity`, for code that logs to an std::ostream;
  // lines written from several threads at once stay whole.
  std::ostream& stream(LogSeverity severity);

 private:
  class LineBuffer;
  LogSettings snapshot() const;  // under mutex_
  void write(LogSeverity severity, std::string_view line, std::FILE* console);

  mutable std::mutex mutex_;  // the file, the format and the writes
  std::string file_path_;
  std::FILE* file_ = nullptr;
  bool iso8601_ = false;
  std::atomic<bool> info_{true}, warning_{true}, error_{true};
  std::atomic<uint32_t> verbose_level_{0};
  std::vector<std::unique_ptr<LineBuffer>> buffers_;  // by severity
  std::vector<std::unique_ptr<std::ostream>> streams_;
};

// GET (body null) or POST of /v2/logging: the settings after the update as Triton's JSON.
std::string log_settings_json(ServeLog& log, const std::string* body);

}  // namespace convoy::serve
