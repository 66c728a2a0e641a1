// libFuzzer target: parse_run_config on arbitrary YAML text. Leading lines of the form
// "#override key.path=value" (YAML comments, so the text parses the same) are also passed
// as --set overrides. Relative paths resolve against the repository's configs/, so a seed
// naming ../models/fmnet.yaml gets past the model-file check into the rest of validation.
// $CONVOY_FUZZ_CONFIG_DIR names another configs/ (a fuzz bundle unpacked elsewhere,
// scripts/fuzz-bundle.sh).
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/config/run_config.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string config_dir = [] {
    const char* env = std::getenv("CONVOY_FUZZ_CONFIG_DIR");
    return std::string(env && *env ? env : CONVOY_SOURCE_DIR "/configs");
  }();
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  constexpr std::string_view kOverride = "#override ";
  size_t pos = 0;
  while (text.compare(pos, kOverride.size(), kOverride) == 0) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    overrides.push_back(text.substr(pos + kOverride.size(), end - pos - kOverride.size()));
    pos = end + (end < text.size());
  }
  convoy::fuzz::expect_input_errors_only([&] {
    (void)convoy::parse_run_config(text, "fuzz.yaml", config_dir, overrides);
  });
  return 0;
}
