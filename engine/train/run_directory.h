#pragma once
// A run directory's housekeeping: one writer at a time, no temporaries left by a killed one,
// and metrics.csv holding no row of an epoch that a resume trains again.
#include <cstdint>
#include <filesystem>
#include <iosfwd>

namespace convoy {

// One writer per run directory: an advisory lock (flock) on <run>/.lock, held while the
// process lives, with the holder's pid in the file for the message another run gets. The
// directory is created first; nothing else is written before the lock is held.
class RunDirLock {
 public:
  // Creates the directory and takes the lock; another holder is an InputError with its pid.
  explicit RunDirLock(const std::filesystem::path& run_dir);
  ~RunDirLock();  // releases the lock; the file stays (unlinking it would race)
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

 private:
  int fd_ = -1;
};

// Temporary files a killed writer left (OutputFile's "<name>.safetensors.tmp.<pid>[.<n>]" and
// "metrics.csv.tmp.<pid>[.<n>]"), removed with a line each to `log`. Call it
// with the run's lock held: no other writer is at work in the directory.
void remove_stale_temporaries(const std::filesystem::path& run_dir, std::ostream& log);

// Drops the rows of metrics.csv past `epochs_done` (and any torn last line), atomically.
void drop_metrics_rows_after(const std::filesystem::path& path, int64_t epochs_done);

}  // namespace convoy
