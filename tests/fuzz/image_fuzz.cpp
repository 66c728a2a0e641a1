// libFuzzer target: image decoding on arbitrary bytes: the header reader, the JPEG and PNG
// decoders (full size, and a JPEG at a DCT scale), and decode_preprocess with fixed
// Preprocess settings in eval mode (resize + centre crop, RGB) and train mode
// (RandomResizedCrop, gray, which lets a JPEG decode smaller).
//
// Images over 4 megapixels by their header are skipped: a header may legitimately ask for up
// to kMaxImagePixels (2^28), whose buffers are allocated before the data is found short, and
// that only slows the fuzzer down; the limit itself is covered by tests/test_image_codec.cpp.
#include <vector>

#include "datasets/image_codec.h"
#include "datasets/preprocess.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  bool small = false;
  convoy::fuzz::expect_input_errors_only([&] {
    const convoy::ImageHeader h = convoy::read_image_header(bytes, "fuzz");
    small = h.width * h.height <= (int64_t{1} << 22);
  });
  if (!small) {
    // Still exercise the format dispatch of a non-image or a corrupt header.
    if (convoy::image_format_of(bytes) == convoy::ImageFormat::unknown)
      convoy::fuzz::expect_input_errors_only([&] { (void)convoy::decode_image(bytes, "fuzz"); });
    return 0;
  }
  convoy::fuzz::expect_input_errors_only([&] { (void)convoy::decode_image(bytes, "fuzz"); });
  convoy::fuzz::expect_input_errors_only([&] {
    const convoy::ScaleHint hint{1e9, 1e9, 1, 1};  // allows the smallest DCT scale
    (void)convoy::decode_image(bytes, "fuzz", &hint);
  });

  convoy::Preprocess eval;
  eval.channels = 3;
  eval.height = eval.width = 24;
  eval.resize = 28;
  std::vector<uint8_t> out(3 * 24 * 24);
  convoy::fuzz::expect_input_errors_only([&] {
    convoy::decode_preprocess(bytes, "fuzz", eval, convoy::SampleMode::eval, 0, out.data());
  });
  convoy::Preprocess train;
  train.channels = 1;
  train.height = train.width = 16;
  train.random_resized_crop = true;
  convoy::fuzz::expect_input_errors_only([&] {
    convoy::decode_preprocess(bytes, "fuzz", train, convoy::SampleMode::train, size, out.data());
  });
  return 0;
}
