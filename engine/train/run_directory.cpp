#include "engine/train/run_directory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <regex>
#include <string>

#include "engine/core/error.h"
#include "engine/core/file_io.h"

namespace convoy {

namespace fs = std::filesystem;

RunDirLock::RunDirLock(const fs::path& run_dir) {
  create_output_directories(run_dir, "the run directory");
  const fs::path path = run_dir / ".lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw InputError(file_message(path, std::string("cannot create the run directory's lock file: ") +
                                            std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder(32, '\0');
    const ssize_t n = ::pread(fd_, holder.data(), holder.size(), 0);
    holder.resize(n > 0 ? static_cast<size_t>(n) : 0);
    holder.erase(std::remove_if(holder.begin(), holder.end(), [](char c) { return c < '0' || c > '9'; }),
                 holder.end());
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK)
      throw InputError(file_message(path, std::string("cannot lock the run directory: ") + std::strerror(err)));
    throw InputError(run_dir.string() + ": another convoy run is writing to this run directory (pid " +
                     (holder.empty() ? std::string("unknown") : holder) +
                     "); wait for it to finish, or give this run another name or output.dir");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size()))
    throw InputError(file_message(path, std::string("cannot write the lock file: ") + std::strerror(errno)));
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

void remove_stale_temporaries(const fs::path& run_dir, std::ostream& log) {
  static const std::regex stale(R"((.+\.safetensors|metrics\.csv)\.tmp\.[0-9]+(\.[0-9]+)?)");
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(run_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file(error) || !std::regex_match(name, stale)) continue;
    if (fs::remove(entry.path(), error))
      log << "removed " << entry.path().string() << ", left by a writer that was killed" << std::endl;
  }
}

void drop_metrics_rows_after(const fs::path& path, int64_t epochs_done) {
  const std::string text = read_text_file(path, "the metrics file", uint64_t{1} << 30);  // refuses a FIFO or device
  std::string kept;
  bool dropped = false;
  size_t begin = 0;
  for (bool header = true; begin < text.size(); header = false) {
    const size_t end = text.find('\n', begin);
    if (end == std::string::npos) {  // a row cut short by a crash
      dropped = true;
      break;
    }
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    char* after = nullptr;
    const long long epoch = std::strtoll(line.c_str(), &after, 10);
    if (!header && (after == line.c_str() || *after != ',' || epoch > epochs_done)) {
      dropped = true;
      continue;
    }
    kept += line + "\n";
  }
  if (!dropped) return;
  write_file_atomically(path, "the metrics file", kept);
}

}  // namespace convoy
