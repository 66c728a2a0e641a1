// decode_image for builds without OpenCV; CMake compiles this file or
// image_decode_opencv.cpp, never both.
#include "datasets/image_decode.h"
#include "engine/core/error.h"

namespace convoy {

bool image_decode_available() { return false; }

Tensor decode_image(const std::filesystem::path& path, int64_t, int64_t, int64_t) {
  throw InputError(path.string() +
                   ": cannot decode images: Convoy was built without OpenCV (CONVOY_OPENCV=OFF "
                   "or libopencv-dev not found); rebuild with libopencv-dev installed");
}

}  // namespace convoy
