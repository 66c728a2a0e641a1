#pragma once
// Shared by the libFuzzer targets (tests/fuzz/README.md): the readers under test take a path,
// so each input is written to an in-memory file (memfd) that they open as /proc/self/fd/N.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "engine/core/error.h"

namespace convoy::fuzz {

class MemFile {
 public:
  MemFile() : fd_(memfd_create("convoy-fuzz", 0)) {
    if (fd_ < 0) std::abort();
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  // Replaces the file's contents with the input and returns the path to read it by.
  const std::string& write(const uint8_t* data, size_t size) {
    if (ftruncate(fd_, 0) != 0) std::abort();
    size_t done = 0;
    while (done < size) {
      const ssize_t n = pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

// Runs `body`; an InputError (the user's input is wrong, exit 1) is the expected way to refuse
// an input. Any other exception would reach the user as an "internal error" (exit 2), so it
// is a finding: printed and aborted, which libFuzzer reports as a crash with the input saved.
template <class F>
void expect_input_errors_only(F&& body) {
  try {
    body();
  } catch (const InputError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: not an InputError: %s\n", e.what());
    // CONVOY_FUZZ_KEEP_GOING=1: report and go on, to look past a known finding for others
    // (memory errors still stop the run).
    static const bool keep_going = [] {
      const char* v = std::getenv("CONVOY_FUZZ_KEEP_GOING");
      return v && std::string(v) == "1";
    }();
    if (!keep_going) std::abort();
  }
}

}  // namespace convoy::fuzz
