// libFuzzer target: read_idx on arbitrary bytes (raw and gzip IDX).
#include "datasets/idx.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static convoy::fuzz::MemFile file;
  const std::string& path = file.write(data, size);
  convoy::fuzz::expect_input_errors_only([&] { (void)convoy::read_idx(path); });
  return 0;
}
