// libFuzzer target: Model::from_yaml on arbitrary YAML text, then what `convoy info` asks of
// a model (summary, counts) and Model::with_classes.
//
// A model allocates its parameters when built, so a valid file with big sizes (a linear
// layer of 10^5 x 10^5) is a legitimate multi-gigabyte model, not a bug, and would only make
// the fuzzer run out of memory. Inputs with a number of 3 or more digits (or a hex, octal or
// exponent number) are skipped; the checks of sizes against bounds themselves are covered
// by the tests (tests/test_model.cpp).
#include <cctype>
#include <string>

#include "engine/graph/model.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

bool has_big_number(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
    if (j - i > 2) return true;
    // 0x.., 0o.., 1e9, 1E+9: YAML and yaml-cpp read these as numbers too.
    if (j < text.size() && std::string_view("xXoOeE").find(text[j]) != std::string_view::npos) return true;
    i = j;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (has_big_number(text)) return -1;  // not added to the corpus
  convoy::fuzz::expect_input_errors_only([&] {
    convoy::Model m = convoy::Model::from_yaml(text, "fuzz.yaml", 1);
    (void)m.summary();
    (void)m.parameter_count();
    (void)m.buffer_count();
    (void)m.forward_flops();
    (void)m.activation_count();
    (void)m.layer_infos();
    const std::string resized = convoy::Model::with_classes(text, "fuzz.yaml", 7);
    if (has_big_number(resized)) return;
    (void)convoy::Model::from_yaml(resized, "fuzz.yaml", 1);
  });
  return 0;
}
