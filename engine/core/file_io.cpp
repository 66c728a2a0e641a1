#include "engine/core/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "engine/core/error.h"

namespace convoy {

namespace fs = std::filesystem;

namespace {

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symlink";
  return "a special file";
}

// "<path>: is a character device, not a regular file; ..." (through a symlink: "is a symlink to X, ...").
InputError not_regular(const fs::path& path, const fs::path& resolved, mode_t mode, std::string_view what) {
  const std::string is = resolved == path ? "is " : "is a symlink to " + resolved.string() + ", ";
  return InputError(file_message(path, is + kind_of(mode) + ", not a regular file; " + std::string(what) +
                                           " is written only as a new file or over a regular file"));
}

struct OutputTarget {
  fs::path path;                  // the symlinks followed: the file to replace or create
  std::optional<struct stat> st;  // when it exists: a regular file
};

// Follows `path`'s symlinks as open() would (up to its 40 links): the file they point to is what
// an output replaces. A missing target is a new file; an unreadable or missing directory is left
// for the temporary file's creation to report.
OutputTarget resolve_output_target(const fs::path& path, std::string_view what) {
  fs::path p = path;
  for (int links = 0; links <= 40; ++links) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) return {p, std::nullopt};
    if (!S_ISLNK(st.st_mode)) {
      if (!S_ISREG(st.st_mode)) throw not_regular(path, p, st.st_mode, what);
      return {p, st};
    }
    std::error_code error;
    const fs::path link = fs::read_symlink(p, error);
    if (error) throw InputError(file_message(path, "cannot read the symlink " + p.string() + ": " + error.message()));
    p = link.is_absolute() ? link : p.parent_path() / link;
  }
  throw InputError(file_message(path, "too many levels of symbolic links"));
}

}  // namespace

OutputFile::OutputFile(const fs::path& path, std::string_view what) : path_(path), what_(what) {
  OutputTarget target = resolve_output_target(path, what);
  target_ = std::move(target.path);
  if (target_.filename().empty() || target_.filename() == "." || target_.filename() == "..")
    throw InputError(file_message(path, "not a file name; name the file to write " + what_ + " to"));
  const fs::path dir = target_.parent_path().empty() ? fs::path(".") : target_.parent_path();
  // The pid keeps processes apart, O_EXCL and the suffix the writers of one process (and a
  // killed process's leftover under a reused pid).
  const std::string base = target_.filename().string() + ".tmp." + std::to_string(::getpid());
  for (int n = 0; fd_ < 0; ++n) {
    temporary_ = dir / (n == 0 ? base : base + "." + std::to_string(n));
    fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    const int err = errno;
    if (fd_ < 0 && (err != EEXIST || n == 1000))
      throw InputError(file_message(path, "cannot write " + what_ + ": cannot create " + temporary_.string() + ": " +
                                              std::strerror(err)));
  }
  // The replaced file's permissions (a private checkpoint stays private); a new file gets the umask's.
  if (target.st && ::fchmod(fd_, target.st->st_mode & 07777) != 0) {
    const int err = errno;
    remove_temporary();
    throw InputError(file_message(path, "cannot write " + what_ + ": cannot set the permissions of " +
                                            temporary_.string() + ": " + std::strerror(err)));
  }
}

OutputFile::~OutputFile() {
  if (!committed_) remove_temporary();
}

void OutputFile::remove_temporary() {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  ::unlink(temporary_.c_str());
}

void OutputFile::fail(const std::string& reason) const {
  throw InputError(file_message(path_, "cannot write " + what_ + ": " + reason));
}

void OutputFile::write(const void* data, size_t bytes) {
  CONVOY_CHECK(fd_ >= 0 && !committed_, "OutputFile::write after commit or a failure");
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, std::min<size_t>(bytes, size_t{1} << 30));
    if (n < 0 && errno == EINTR) continue;
    // EFBIG (the file size limit, `ulimit -f`) and ENOSPC (a full disk) end here.
    if (n <= 0) fail(n < 0 ? std::strerror(errno) : "the device took no bytes");
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void OutputFile::commit() {
  CONVOY_CHECK(fd_ >= 0 && !committed_, "OutputFile::commit twice or after a failure");
  if (::fsync(fd_) != 0) fail(std::string("fsync of ") + temporary_.string() + ": " + std::strerror(errno));
  // Some file systems (NFS) report a write error only at close.
  if (::close(std::exchange(fd_, -1)) != 0)
    fail(std::string("closing ") + temporary_.string() + ": " + std::strerror(errno));
  // Again, just before the rename: something put there since the constructor is not destroyed.
  struct stat st {};
  if (::lstat(target_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) throw not_regular(path_, target_, st.st_mode, what_);
  if (::rename(temporary_.c_str(), target_.c_str()) != 0)
    fail("renaming " + temporary_.string() + " over it: " + std::strerror(errno));
  committed_ = true;
  // The rename itself, durable.
  const fs::path dir = target_.parent_path().empty() ? fs::path(".") : target_.parent_path();
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) fail(std::string("opening its directory to fsync: ") + std::strerror(errno));
  const int rc = ::fsync(dir_fd);
  const int err = errno;
  ::close(dir_fd);
  if (rc != 0) fail(std::string("fsync of its directory: ") + std::strerror(err));
}

void write_file_atomically(const fs::path& path, std::string_view what, std::string_view bytes) {
  OutputFile file(path, what);
  file.write(bytes);
  file.commit();
}

void check_output_target(const fs::path& path, std::string_view what) { resolve_output_target(path, what); }

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
