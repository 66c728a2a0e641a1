#pragma once
// Host file helpers shared by the checkpoint and dataset readers and every writer of output:
// every failure is an InputError whose message starts with the file's path.
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

// An output written atomically, the one way every command writes a file (checkpoints, ONNX,
// YAML, predictions, bench results): the bytes go to a temporary file beside the target,
// "<name>.tmp.<pid>" (".<n>" added while that name is taken), which commit() fsyncs and renames
// over the target, then fsyncs the directory. Destroyed without commit() (a write error, a full
// disk, an exception anywhere), the temporary file is removed and the target is as it was: a
// reader never sees a torn file. A target that exists and is not a regular file (a directory, a
// device such as /dev/full, a FIFO, a socket) is refused, here and again just before the rename:
// renaming over it would destroy it. A symlink is followed: the file it points to is replaced,
// beside itself, and the link stays (what writing through it would do, without the tear); a
// link to anything but a regular file is refused like that thing.
class OutputFile {
 public:
  // `what` names the content in messages: "<path>: cannot write <what>: <reason>".
  OutputFile(const std::filesystem::path& path, std::string_view what);
  ~OutputFile();  // without commit(): removes the temporary file
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  const std::filesystem::path& path() const { return path_; }  // the target, as given
  void write(const void* data, size_t bytes);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // Makes the file the target, durably. Only once; nothing may be written after it.
  void commit();
  [[noreturn]] void fail(const std::string& reason) const;  // "<path>: cannot write <what>: <reason>"

 private:
  void remove_temporary();

  std::filesystem::path path_;    // as given
  std::filesystem::path target_;  // with a symlink resolved: what is replaced
  std::filesystem::path temporary_;
  std::string what_;
  int fd_ = -1;
  bool committed_ = false;
};

// `bytes` as the whole of `path`, through OutputFile.
void write_file_atomically(const std::filesystem::path& path, std::string_view what, std::string_view bytes);

// Refuses (InputError "<path>: ... not a regular file ...") a target that exists and is not a
// regular file, following symlinks as OutputFile does. Commands call it before long work
// (calibration, training) so that a bad -o fails at once; OutputFile checks again.
void check_output_target(const std::filesystem::path& path, std::string_view what);

// "<path>: <message>", the one shape of every file error.
std::string file_message(const std::filesystem::path& path, std::string_view message);

// std::filesystem::create_directories, except that a failure (a file in the way, no
// permission, a full disk) is the user's to fix: "<dir>: cannot create <what>: <reason>".
void create_output_directories(const std::filesystem::path& dir, std::string_view what);

}  // namespace convoy
