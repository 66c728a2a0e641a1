#pragma once
// Pieces of Prometheus's text exposition format (version 0.0.4), shared by the model, server and
// device metrics: a family's header, a label value escaped, a float as Prometheus reads it.
#include <charconv>
#include <cmath>
#include <ostream>
#include <string>
#include <string_view>

namespace convoy::serve {

inline void prometheus_header(std::ostream& out, std::string_view name, std::string_view type, std::string_view help) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

// A label value between its quotes: backslash, double quote and newline escaped.
inline std::string prometheus_label(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// The shortest text that reads back as `value` ("0.43", "700", "1.5e+20"); NaN and infinities as
// Prometheus spells them.
inline std::string prometheus_number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char text[32];
  const auto [end, error] = std::to_chars(text, text + sizeof text, value);
  return error == std::errc() ? std::string(text, end) : "NaN";
}

}  // namespace convoy::serve
