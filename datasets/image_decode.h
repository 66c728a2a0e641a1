#pragma once
// Decoding one image file (JPEG or PNG) into a tensor, for `convoy infer IMAGE`.
#include <cstdint>
#include <filesystem>

#include "engine/core/tensor.h"

namespace convoy {

// Always true: JPEG (libjpeg-turbo) and PNG (libpng) decoding is built in. Kept for
// `convoy doctor`, which reports it.
bool image_decode_available();

// Decodes a JPEG or PNG file (told apart by content, not by name) into a (channels, height,
// width) u8 tensor on the CPU. channels: 1 (gray) or 3 (RGB); gray sources are repeated,
// colour ones become gray as OpenCV computes it (0.299 R + 0.587 G + 0.114 B), alpha is
// dropped and 16-bit samples are reduced to 8. The whole image is resized to height x width
// with PIL's antialiased bilinear filter (datasets/resample.h). A missing, empty, corrupt,
// truncated or non-image file is an InputError naming the file.
Tensor decode_image(const std::filesystem::path& path, int64_t channels, int64_t height,
                    int64_t width);

}  // namespace convoy
