// decode_image through OpenCV; CMake compiles this file or image_decode_unavailable.cpp.
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <limits>
#include <string>
#include <vector>

#include "datasets/image_decode.h"
#include "engine/core/file_io.h"
#include "engine/core/error.h"

namespace convoy {
namespace {

constexpr int64_t kMaxSide = 1 << 16;

// 8-bit pixels from whatever depth the codec produced (16-bit PNG, float TIFF/EXR).
cv::Mat to_8bit(const cv::Mat& img, const InputFile& file) {
  switch (img.depth()) {
    case CV_8U: return img;
    case CV_16U: { cv::Mat out; img.convertTo(out, CV_8U, 1.0 / 257.0); return out; }
    case CV_32F:
    case CV_64F: { cv::Mat out; img.convertTo(out, CV_8U, 255.0); return out; }  // [0, 1] floats
    default: file.fail("unsupported pixel depth (OpenCV depth " + std::to_string(img.depth()) +
                       "), expected 8-bit, 16-bit or float pixels");
  }
}

// OpenCV's BGR(A)/gray to the requested channel count, in RGB(A) order.
cv::Mat to_channels(const cv::Mat& img, int64_t channels, const InputFile& file) {
  cv::Mat src = img;
  if (src.channels() == 2) {  // gray + alpha: keep the gray
    cv::extractChannel(img, src, 0);
  }
  const int have = src.channels();
  if (have != 1 && have != 3 && have != 4)
    file.fail("image has " + std::to_string(have) + " channels, expected 1, 2, 3 or 4");
  if (have == channels && channels == 1) return src;
  int code = -1;
  if (channels == 1) code = have == 3 ? cv::COLOR_BGR2GRAY : cv::COLOR_BGRA2GRAY;
  if (channels == 3) code = have == 1 ? cv::COLOR_GRAY2RGB : have == 3 ? cv::COLOR_BGR2RGB : cv::COLOR_BGRA2RGB;
  if (channels == 4) code = have == 1 ? cv::COLOR_GRAY2RGBA : have == 3 ? cv::COLOR_BGR2RGBA : cv::COLOR_BGRA2RGBA;
  cv::Mat out;
  cv::cvtColor(src, out, code);
  return out;
}

}  // namespace

bool image_decode_available() { return true; }

Tensor decode_image(const std::filesystem::path& path, int64_t channels, int64_t height,
                    int64_t width) {
  if (channels != 1 && channels != 3 && channels != 4)
    throw InputError(file_message(path, "cannot decode to " + std::to_string(channels) +
                                            " channels, expected 1, 3 or 4"));
  if (height < 1 || width < 1 || height > kMaxSide || width > kMaxSide)
    throw InputError(file_message(path, "cannot decode to size " + std::to_string(height) + "x" +
                                            std::to_string(width) + ", expected 1 to " +
                                            std::to_string(kMaxSide) + " per side"));
  // Reading the bytes ourselves gives exact errors for missing files and keeps OpenCV from
  // printing its own warnings (imread does; imdecode of a buffer is quiet).
  InputFile file(path);
  if (file.size() == 0) file.fail("empty file, expected an image");
  if (file.size() > static_cast<uint64_t>(std::numeric_limits<int>::max()))
    file.fail("file of " + std::to_string(file.size()) + " bytes is too large for an image");
  std::vector<uint8_t> bytes(static_cast<size_t>(file.size()));
  file.read_exact(bytes.data(), bytes.size(), "image data");

  cv::Mat decoded;
  try {
    const cv::Mat buffer(1, static_cast<int>(bytes.size()), CV_8U, bytes.data());
    decoded = cv::imdecode(buffer, cv::IMREAD_UNCHANGED);
  } catch (const cv::Exception& e) {
    file.fail("not a readable image (OpenCV: " + e.msg + ")");
  }
  if (decoded.empty() || decoded.rows < 1 || decoded.cols < 1)
    file.fail("not a readable image (corrupt, or a format OpenCV cannot decode)");

  cv::Mat img;
  try {
    img = to_channels(to_8bit(decoded, file), channels, file);
    if (img.rows != height || img.cols != width) {
      const bool shrink = height <= img.rows && width <= img.cols;
      cv::Mat resized;
      cv::resize(img, resized, cv::Size(static_cast<int>(width), static_cast<int>(height)), 0, 0,
                 shrink ? cv::INTER_AREA : cv::INTER_LINEAR);
      img = resized;
    }
  } catch (const cv::Exception& e) {
    file.fail("cannot convert the image (OpenCV: " + e.msg + ")");
  }
  if (!img.isContinuous()) img = img.clone();

  // (H, W, C) interleaved to (C, H, W) planes.
  Tensor out = Tensor::empty({channels, height, width}, DType::u8);
  uint8_t* dst = out.data<uint8_t>();
  const uint8_t* src = img.ptr<uint8_t>();
  const int64_t plane = height * width;
  for (int64_t p = 0; p < plane; ++p)
    for (int64_t c = 0; c < channels; ++c) dst[c * plane + p] = src[p * channels + c];
  return out;
}

}  // namespace convoy
