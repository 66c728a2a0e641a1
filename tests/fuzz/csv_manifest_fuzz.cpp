// libFuzzer target: load_csv_manifest on arbitrary manifest text. The manifest is written
// into a temporary directory that holds a.png and b/c.jpg, so that rows naming those get past
// the file checks.
#include <fstream>
#include <filesystem>

#include "datasets/dataset.h"
#include "tests/fuzz/fuzz_support.h"

namespace fs = std::filesystem;

namespace {

const fs::path& fixture_dir() {
  static const fs::path dir = [] {
    char name[] = "/tmp/convoy-csv-fuzz-XXXXXX";
    if (!mkdtemp(name)) std::abort();
    fs::path d(name);
    fs::create_directories(d / "b");
    std::ofstream(d / "a.png") << "x";
    std::ofstream(d / "b" / "c.jpg") << "x";
    std::atexit([] { std::error_code ec; fs::remove_all(fixture_dir(), ec); });
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path manifest = fixture_dir() / "train.csv";
  {
    std::ofstream out(manifest, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  convoy::fuzz::expect_input_errors_only([&] {
    (void)convoy::load_csv_manifest(fixture_dir(), "train", size % 4);
    (void)convoy::load_csv_manifest(manifest, "train", 0);
  });
  return 0;
}
