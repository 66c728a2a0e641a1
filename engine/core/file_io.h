#pragma once
// Host file helpers shared by the checkpoint and dataset readers and the writers of run
// output: every failure is an InputError whose message starts with the file's path.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace convoy {

// A regular file open for reading. Refuses directories, FIFOs and devices up front, so a
// reader can never block on a pipe or read an endless /dev/zero.
class InputFile {
 public:
  // `missing_hint` is appended to the "no such file" message ("; install ...").
  explicit InputFile(const std::filesystem::path& path, std::string_view missing_hint = {});
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  uint64_t size() const { return size_; }  // bytes, as stat() reported at open
  // Up to `bytes` bytes; fewer only at the end of the file. Throws on a read error.
  size_t read_some(void* dst, size_t bytes);
  // Exactly `bytes` bytes, else "<path>: truncated: expected N bytes of <what>, found M".
  void read_exact(void* dst, size_t bytes, std::string_view what);
  // Moves the read position to `offset` bytes from the start.
  void seek(uint64_t offset);
  // Throws "<path>: <message>" as an InputError.
  [[noreturn]] void fail(const std::string& message) const;

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  uint64_t size_ = 0;
};

// The whole of a small text file (a config, a model YAML) through InputFile: a device, a FIFO
// or a file over `max_bytes` is "<path>: <what> is ... (at most N bytes)", never an endless read.
std::string read_text_file(const std::filesystem::path& path, std::string_view what, uint64_t max_bytes);

// "<path>: <message>", the one shape of every file error.
std::string file_message(const std::filesystem::path& path, std::string_view message);

// std::filesystem::create_directories, except that a failure (a file in the way, no
// permission, a full disk) is the user's to fix: "<dir>: cannot create <what>: <reason>".
void create_output_directories(const std::filesystem::path& dir, std::string_view what);

}  // namespace convoy
