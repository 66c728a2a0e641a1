#pragma once
// Helpers shared by the reference's source files (not part of its interface).
#include <cstdint>
#include <stdexcept>
#include <string>

#include "engine/core/tensor.h"

namespace convoy::ref::detail {

inline void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("reference op: " + what);
}

inline int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Row-major offset of (a, b, c, d) in a 4-D shape.
inline int64_t at4(const Shape& s, int64_t a, int64_t b, int64_t c, int64_t d) {
  return ((a * s[1] + b) * s[2] + c) * s[3] + d;
}

}  // namespace convoy::ref::detail
