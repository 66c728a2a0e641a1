#include "engine/core/precision.h"

#include <algorithm>

#include "engine/core/error.h"

namespace convoy {

const char* to_string(Precision p) {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::tf32: return "tf32";
    case Precision::bf16: return "bf16";
    case Precision::int8: return "int8";
    case Precision::fp8: return "fp8";
  }
  return "?";
}

std::optional<Precision> precision_from_string(std::string_view text) {
  for (Precision p : kAllPrecisions)
    if (text == to_string(p)) return p;
  return std::nullopt;
}

std::vector<std::string> precision_names(std::span<const Precision> precisions) {
  std::vector<std::string> names;
  for (Precision p : precisions) names.emplace_back(to_string(p));
  return names;
}

std::string precision_list(std::span<const Precision> precisions) {
  std::string list;
  for (Precision p : precisions) list += (list.empty() ? "" : ", ") + std::string(to_string(p));
  return list;
}

Precision parse_precision(std::string_view text, std::span<const Precision> allowed, const std::string& what) {
  const std::optional<Precision> p = precision_from_string(text);
  if (!p || std::find(allowed.begin(), allowed.end(), *p) == allowed.end())
    throw InputError(what + ": '" + std::string(text) + "' is not one of: " + precision_list(allowed));
  return *p;
}

bool has_tf32_math(DeviceKind device) { return device == DeviceKind::cuda; }

bool trains_in(Precision p, DeviceKind device) {
  switch (p) {
    case Precision::fp32: return true;
    case Precision::tf32: return has_tf32_math(device);
    case Precision::bf16: return device == DeviceKind::cuda;
    case Precision::int8:
    case Precision::fp8: return false;
  }
  return false;
}

bool infers_in(Precision p, DeviceKind device) {
  switch (p) {
    case Precision::fp32: return true;
    case Precision::tf32: return has_tf32_math(device);
    case Precision::bf16: return true;
    case Precision::int8: return true;
    case Precision::fp8: return device == DeviceKind::cuda;
  }
  return false;
}

bool infers_through_plan_only(Precision p, DeviceKind device) {
  return device == DeviceKind::cpu && (p == Precision::bf16 || p == Precision::int8);
}

}  // namespace convoy
