#include "engine/core/file_io.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "engine/core/error.h"

namespace convoy {

std::string file_message(const std::filesystem::path& path, std::string_view message) {
  return path.string() + ": " + std::string(message);
}

void create_output_directories(const std::filesystem::path& dir, std::string_view what) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw InputError(file_message(dir, "cannot create " + std::string(what) + ": " + error.message()));
}

std::string read_text_file(const std::filesystem::path& path, std::string_view what, uint64_t max_bytes) {
  InputFile file(path);
  if (file.size() > max_bytes)
    file.fail(std::string(what) + " of " + std::to_string(file.size()) + " bytes is too large (at most " +
              std::to_string(max_bytes) + " bytes)");
  std::string text(static_cast<size_t>(file.size()), '\0');
  // The size stat() gave; a file that grew since is cut there, one that shrank is shorter.
  text.resize(file.read_some(text.data(), text.size()));
  return text;
}

InputFile::InputFile(const std::filesystem::path& path, std::string_view missing_hint)
    : path_(path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR)
      fail("no such file" + std::string(missing_hint));
    fail(std::string("cannot open: ") + std::strerror(err));
  }
  if (S_ISDIR(st.st_mode)) fail("is a directory, expected a file");
  if (!S_ISREG(st.st_mode)) fail("not a regular file");
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) fail(std::string("cannot open: ") + std::strerror(errno));
  size_ = static_cast<uint64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (file_) std::fclose(file_);
}

void InputFile::fail(const std::string& message) const {
  throw InputError(file_message(path_, message));
}

size_t InputFile::read_some(void* dst, size_t bytes) {
  size_t got = 0;
  auto* out = static_cast<char*>(dst);
  while (got < bytes) {
    const size_t n = std::fread(out + got, 1, bytes - got, file_);
    got += n;
    if (n == 0) {
      if (std::ferror(file_)) fail(std::string("read error: ") + std::strerror(errno));
      break;  // end of file
    }
  }
  return got;
}

void InputFile::seek(uint64_t offset) {
  if (::fseeko(file_, static_cast<off_t>(offset), SEEK_SET) != 0)
    fail(std::string("cannot seek: ") + std::strerror(errno));
}

void InputFile::read_exact(void* dst, size_t bytes, std::string_view what) {
  const size_t got = read_some(dst, bytes);
  if (got != bytes)
    fail("truncated: expected " + std::to_string(bytes) + " bytes of " + std::string(what) +
         ", found " + std::to_string(got));
}

}  // namespace convoy
