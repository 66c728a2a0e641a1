#pragma once
// Decoding image files (PNG, JPEG, BMP, ... through OpenCV) into tensors.
#include <cstdint>
#include <filesystem>

#include "engine/core/tensor.h"

namespace convoy {

// False when Convoy was built without OpenCV (CONVOY_OPENCV=OFF or not found).
bool image_decode_available();

// Decodes an image file into a (channels, height, width) u8 tensor on the CPU.
// channels: 1 (gray), 3 (RGB order) or 4 (RGBA); gray, BGR, BGRA and 16-bit sources are
// converted. The image is resized to height x width (INTER_AREA when shrinking, else
// INTER_LINEAR). A missing, corrupt or non-image file is an InputError naming the file;
// so is any call in a build without OpenCV.
Tensor decode_image(const std::filesystem::path& path, int64_t channels, int64_t height,
                    int64_t width);

}  // namespace convoy
