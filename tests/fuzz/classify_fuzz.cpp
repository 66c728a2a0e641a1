// libFuzzer target: a body POSTed to convoy serve's classify endpoint (or one element of a BYTES
// input), as the server decodes it: an empty body is refused before; the image's header read
// first, refused past the pixel cap the server applies before decoding; then decoded and
// preprocessed with the preprocessing of two kinds of served checkpoint, a Fashion-MNIST one (gray
// 28x28, resized straight) and an ImageNet one (RGB, shorter side to 256, centre crop 224).
// Refusals must be InputErrors (a 400).
//
// The cap here is 4 megapixels, as in the `image` target: bigger images are legitimate
// allocations that slow the fuzzer, and their refusal by the server's budget is a unit test's.
#include <vector>

#include "datasets/image_codec.h"
#include "datasets/preprocess.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;  // refused before decoding
  const std::span<const uint8_t> bytes(data, size);
  int64_t pixels = -1;
  convoy::fuzz::expect_input_errors_only([&] {
    const convoy::ImageHeader h = convoy::read_image_header(bytes, "classify");
    pixels = h.width * h.height;
  });
  if (pixels < 0 || pixels > (int64_t{1} << 22)) return 0;

  convoy::Preprocess fashion;  // channels 1, 28x28, no resize: the defaults
  convoy::Preprocess imagenet;
  imagenet.channels = 3;
  imagenet.height = imagenet.width = 224;
  imagenet.resize = 256;
  std::vector<uint8_t> out(3 * 224 * 224);
  for (const convoy::Preprocess* p : {&fashion, &imagenet})
    convoy::fuzz::expect_input_errors_only([&] {
      convoy::decode_preprocess(bytes, "classify", *p, convoy::SampleMode::eval, 0, out.data());
    });
  return 0;
}
