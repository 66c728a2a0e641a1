#pragma once
// DataLoader: shuffled batches of a Dataset, assembled by a background thread.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "datasets/dataset.h"
#include "engine/core/tensor.h"

namespace convoy {

struct Batch {
  Tensor images;       // (B, C, H, W) u8 on the CPU
  Tensor labels;       // (B) i32 on the CPU
  int64_t index = -1;  // batch index within the epoch
};

// The sample order of an epoch is a pure function of (seed, epoch), so a resumed run sees
// exactly the batches the interrupted one would have. Normalization and augmentation are
// not done here (a backend op does them on the device). One consumer thread only.
class DataLoader {
 public:
  // `dataset` must outlive the loader. batch_size >= 1. drop_last drops a final partial batch.
  DataLoader(const Dataset& dataset, int64_t batch_size, bool shuffle, bool drop_last,
             uint64_t seed);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Starts (or restarts, abandoning the current one) epoch `epoch`, beginning at batch
  // `skip_batches` (0 <= skip_batches <= batches_per_epoch()) so a resumed run can start
  // mid-epoch.
  void start_epoch(int64_t epoch, int64_t skip_batches = 0);
  // The next batch of the epoch; false once the epoch is done.
  bool next(Batch& batch);
  int64_t batches_per_epoch() const;
  int64_t batch_size() const { return batch_size_; }
  // The sample indices of epoch `epoch` in the order they are served.
  std::vector<int64_t> epoch_order(int64_t epoch) const;

 private:
  static constexpr size_t kQueueDepth = 3;
  void stop_worker();
  void worker_main(int64_t first_batch, int64_t end_batch);
  Batch assemble(int64_t batch_index) const;

  const Dataset& dataset_;
  int64_t batch_size_;
  bool shuffle_;
  bool drop_last_;
  uint64_t seed_;
  std::vector<int64_t> order_;  // the current epoch's order; fixed while the worker runs
  bool started_ = false;

  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable ready_;  // a batch was queued, or the worker finished
  std::condition_variable space_;  // a batch was taken, or stop_ was set
  std::deque<Batch> queue_;
  bool stop_ = false;
  bool finished_ = false;
  std::exception_ptr error_;
};

}  // namespace convoy
