// libFuzzer target: a body POSTed to convoy serve's classify endpoint (or one element of a BYTES
// input), as the server admits and decodes it: an empty body is refused before; the image's cost
// read from its header (image_cost) and held to the default image budget (check_image_budget, a
// 413); then decoded and preprocessed with the preprocessing of two kinds of served checkpoint, a
// Fashion-MNIST one (gray 28x28, resized straight) and an ImageNet one (RGB, shorter side to 256,
// centre crop 224). Refusals must be the budget's 413 or InputErrors (a 400).
//
// Images within the budget but over 4 megapixels are not decoded, as in the `image` target: they
// are legitimate allocations that slow the fuzzer down.
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "apps/serve/image_budget.h"
#include "apps/serve/kserve_json.h"
#include "datasets/image_codec.h"
#include "datasets/preprocess.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;  // refused before decoding
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const convoy::serve::ImageCost cost = convoy::serve::image_cost(body);
  try {
    convoy::serve::check_image_budget(cost, 1, convoy::serve::ImageBudget{});
  } catch (const convoy::serve::RequestError& e) {
    if (e.status() != 413) std::abort();
    return 0;
  }
  if (cost.pixels > (int64_t{1} << 22)) return 0;

  const std::span<const uint8_t> bytes(data, size);
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
