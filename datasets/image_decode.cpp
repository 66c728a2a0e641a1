// decode_image: a whole file through decode_preprocess, resized to the requested size.
#include "datasets/image_decode.h"

#include <limits>
#include <string>
#include <vector>

#include "datasets/image_codec.h"
#include "datasets/preprocess.h"
#include "engine/core/error.h"
#include "engine/core/file_io.h"

namespace convoy {

bool image_decode_available() { return true; }

Tensor decode_image(const std::filesystem::path& path, int64_t channels, int64_t height,
                    int64_t width) {
  if (channels != 1 && channels != 3)
    throw InputError(file_message(path, "cannot decode to " + std::to_string(channels) +
                                            " channels, expected 1 or 3"));
  if (height < 1 || width < 1 || height > kMaxImageSide || width > kMaxImageSide)
    throw InputError(file_message(path, "cannot decode to size " + std::to_string(height) + "x" +
                                            std::to_string(width) + ", expected 1 to " +
                                            std::to_string(kMaxImageSide) + " per side"));
  InputFile file(path);
  if (file.size() == 0) file.fail("empty file, expected a JPEG or PNG image");
  if (file.size() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
    file.fail("file of " + std::to_string(file.size()) + " bytes is too large for an image");
  std::vector<uint8_t> bytes(static_cast<size_t>(file.size()));
  file.read_exact(bytes.data(), bytes.size(), "image data");

  Preprocess p;
  p.channels = channels;
  p.height = height;
  p.width = width;
  p.resize = 0;  // the whole image, to (height, width)
  Tensor out = Tensor::empty({channels, height, width}, DType::u8);
  decode_preprocess(bytes, path.string(), p, SampleMode::eval, 0, out.data<uint8_t>());
  return out;
}

}  // namespace convoy
