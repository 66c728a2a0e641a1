#pragma once
// What image_codec.cpp (JPEG) and png_codec.cpp share: the error shape and the size checks.
#include <cstdint>
#include <string>
#include <string_view>

#include "datasets/image_codec.h"
#include "engine/core/error.h"

namespace convoy::codec {

[[noreturn]] inline void fail(std::string_view name, const std::string& message) {
  throw InputError(std::string(name) + ": " + message);
}

inline void check_size(std::string_view name, const char* format, int64_t width, int64_t height) {
  if (width < 1 || height < 1)
    fail(name, std::string("corrupt ") + format + " header (size " + std::to_string(width) + "x" +
                   std::to_string(height) + ")");
  if (width > kMaxImageSide || height > kMaxImageSide || width * height > kMaxImagePixels)
    fail(name, std::string(format) + " image of " + std::to_string(width) + "x" + std::to_string(height) +
                   " pixels is too large (at most " + std::to_string(kMaxImageSide) + " per side and " +
                   std::to_string(kMaxImagePixels) + " pixels)");
}

inline uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace convoy::codec
