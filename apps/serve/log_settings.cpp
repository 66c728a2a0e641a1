#include "apps/serve/log_settings.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <limits>
#include <streambuf>

#include <nlohmann/json.hpp>

#include "apps/serve/kserve_json.h"
#include "engine/core/error.h"

namespace convoy::serve {

using json = nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& what) { throw RequestError(400, what); }

// What each setting takes, for the errors; a name not here is no setting.
const std::map<std::string, std::string>& expected_types() {
  static const std::map<std::string, std::string> types = {
      {"log_file", "a string"},        {"log_info", "a boolean"},   {"log_warning", "a boolean"},
      {"log_error", "a boolean"},      {"log_verbose_level", "an integer >= 0"}, {"log_format", "a string"}};
  return types;
}

bool valid_format(const std::string& f) { return f == "default" || f == "ISO8601"; }

char letter(LogSeverity s) {
  switch (s) {
    case LogSeverity::info:
      return 'I';
    case LogSeverity::warning:
      return 'W';
    case LogSeverity::error:
      return 'E';
    case LogSeverity::verbose:
      return 'V';
  }
  return 'I';
}

}  // namespace

// Collects each thread's characters into lines of its own, so that two threads writing at once
// (std::cerr is shared) give two whole messages rather than one interleaved.
class ServeLog::LineBuffer : public std::streambuf {
 public:
  LineBuffer(ServeLog& log, LogSeverity severity) : log_(log), severity_(severity) {}

 protected:
  int_type overflow(int_type c) override {
    if (c == traits_type::eof()) return traits_type::not_eof(c);
    const char ch = traits_type::to_char_type(c);
    xsputn(&ch, 1);
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::vector<std::string> lines;
    {
      std::lock_guard lock(mutex_);
      auto it = pending_.try_emplace(std::this_thread::get_id()).first;
      for (std::streamsize i = 0; i < n; ++i) {
        if (s[i] != '\n') {
          it->second += s[i];
          continue;
        }
        lines.push_back(std::move(it->second));
        it->second.clear();
      }
      if (it->second.empty()) pending_.erase(it);
    }
    for (const std::string& line : lines) log_.message(severity_, line);
    return n;
  }

 private:
  ServeLog& log_;
  const LogSeverity severity_;
  std::mutex mutex_;
  std::map<std::thread::id, std::string> pending_;
};

ServeLog::ServeLog() {
  for (LogSeverity s : {LogSeverity::info, LogSeverity::warning, LogSeverity::error, LogSeverity::verbose}) {
    buffers_.push_back(std::make_unique<LineBuffer>(*this, s));
    streams_.push_back(std::make_unique<std::ostream>(buffers_.back().get()));
  }
}

ServeLog::~ServeLog() {
  if (file_) std::fclose(file_);
}

void ServeLog::configure(const LogSettings& startup) {
  if (!valid_format(startup.format))
    throw InputError("--log-format " + startup.format + ": expected default or ISO8601");
  std::FILE* file = nullptr;
  if (!startup.file.empty()) {
    file = std::fopen(startup.file.c_str(), "a");
    if (!file) throw InputError("--log-file " + startup.file + ": cannot open it for appending: " + std::strerror(errno));
  }
  std::lock_guard lock(mutex_);
  if (file_) std::fclose(file_);
  file_ = file;
  file_path_ = startup.file;
  iso8601_ = startup.format == "ISO8601";
  info_ = startup.info;
  warning_ = startup.warning;
  error_ = startup.error;
  verbose_level_ = startup.verbose_level;
}

LogSettings ServeLog::settings() const {
  std::lock_guard lock(mutex_);
  return snapshot();
}

LogSettings ServeLog::snapshot() const {
  LogSettings s;
  s.file = file_path_;
  s.info = info_;
  s.warning = warning_;
  s.error = error_;
  s.verbose_level = verbose_level_;
  s.format = iso8601_ ? "ISO8601" : "default";
  return s;
}

LogSettings ServeLog::update(const std::vector<std::pair<std::string, LogValue>>& settings) {
  std::lock_guard lock(mutex_);  // two updates at once: one after the other, neither lost
  LogSettings s = snapshot();
  for (const auto& [name, value] : settings) {
    const auto type = expected_types().find(name);
    if (type == expected_types().end())
      bad("unknown log setting '" + name + "' (log_info, log_warning, log_error, log_verbose_level, log_format)");
    if (std::holds_alternative<std::monostate>(value)) continue;  // null changes nothing, as Triton
    if (name == "log_file")  // as Triton: the server is not told over the network where to write
      throw RequestError(501, "log file location can not be updated through network protocol");
    if (name == "log_info" || name == "log_warning" || name == "log_error") {
      const bool* b = std::get_if<bool>(&value);
      if (!b) bad("expect boolean for '" + name + "'");
      (name == "log_info" ? s.info : name == "log_warning" ? s.warning : s.error) = *b;
    } else if (name == "log_verbose_level") {
      const int64_t* v = std::get_if<int64_t>(&value);
      if (!v || *v < 0 || *v > std::numeric_limits<uint32_t>::max())
        bad("expect an integer from 0 to " + std::to_string(std::numeric_limits<uint32_t>::max()) + " for '" + name + "'");
      s.verbose_level = static_cast<uint32_t>(*v);
    } else {
      const std::string* f = std::get_if<std::string>(&value);
      if (!f) bad("expect string for '" + name + "'");
      if (!valid_format(*f)) bad("invalid argument for log_format, got: " + *f + " (default, ISO8601)");
      s.format = *f;
    }
  }
  iso8601_ = s.format == "ISO8601";
  info_ = s.info;
  warning_ = s.warning;
  error_ = s.error;
  verbose_level_ = s.verbose_level;
  return s;
}

void ServeLog::write(LogSeverity severity, std::string_view line, std::FILE* console) {
  std::string text;
  std::lock_guard lock(mutex_);
  if (iso8601_) {
    const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm utc{};
    gmtime_r(&now, &utc);
    char when[32];
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
    text = std::string(when) + " " + letter(severity) + " " + std::to_string(getpid()) + " convoy] ";
  }
  text.append(line);
  text += '\n';
  std::FILE* out = file_ ? file_ : console;
  std::fwrite(text.data(), 1, text.size(), out);
  std::fflush(out);
}

void ServeLog::message(LogSeverity severity, std::string_view line) {
  const bool on = severity == LogSeverity::info      ? info_.load()
                  : severity == LogSeverity::warning ? warning_.load()
                  : severity == LogSeverity::error   ? error_.load()
                                                     : verbose(1);
  if (on) write(severity, line, stderr);
}

void ServeLog::request_line(std::string_view json) {
  if (verbose(1)) write(LogSeverity::verbose, json, stdout);
}

std::ostream& ServeLog::stream(LogSeverity severity) { return *streams_[static_cast<size_t>(severity)]; }

std::string log_settings_json(ServeLog& log, const std::string* body) {
  if (body && body->find_first_not_of(" \t\r\n") != std::string::npos) {  // an empty body changes nothing
    const json doc = json::parse(*body, nullptr, false);
    if (doc.is_discarded()) bad("malformed JSON in the request body");
    if (!doc.is_object()) bad("the log setting request must be a JSON object, got " + std::string(doc.type_name()));
    std::vector<std::pair<std::string, LogValue>> settings;
    for (const auto& [name, v] : doc.items()) {
      const auto type = expected_types().find(name);
      LogValue value;
      if (v.is_boolean())
        value = v.get<bool>();
      else if (v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX))
        value = v.get<int64_t>();
      else if (v.is_string())
        value = v.get<std::string>();
      else if (!v.is_null() && type != expected_types().end())  // a fraction, an array, an object
        bad("'" + name + "' must be " + type->second + ", got " + v.dump());
      settings.emplace_back(name, std::move(value));
    }
    log.update(settings);
  }
  const LogSettings s = log.settings();
  return json{{"log_file", s.file},           {"log_info", s.info},
              {"log_warning", s.warning},     {"log_error", s.error},
              {"log_verbose_level", s.verbose_level}, {"log_format", s.format}}
      .dump();
}

}  // namespace convoy::serve
