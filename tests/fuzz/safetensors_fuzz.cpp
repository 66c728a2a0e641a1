// libFuzzer target: read_safetensors on arbitrary bytes.
#include "engine/checkpoint/safetensors.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static convoy::fuzz::MemFile file;
  const std::string& path = file.write(data, size);
  convoy::fuzz::expect_input_errors_only([&] {
    convoy::SafetensorsFile f = convoy::read_safetensors(path);
    for (const auto& t : f.tensors) (void)f.at(t.name);
  });
  return 0;
}
