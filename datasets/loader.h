#pragma once
// DataLoader: shuffled, preprocessed batches of a Dataset, assembled by worker threads.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "datasets/batch_decoder.h"
#include "datasets/dataset.h"
#include "datasets/preprocess.h"
#include "engine/core/tensor.h"

namespace convoy {

struct Batch {
  Tensor images;       // (B, C, H, W) u8 on the host (on the GPU from a batch_decoder)
  Tensor labels;       // (B) i32 on the host
  int64_t index = -1;  // batch index within the epoch
  int64_t skipped = 0; // unreadable samples left out of it (on_bad_image: skip)
};

struct LoaderOptions {
  int64_t batch_size = 128;
  bool shuffle = true;
  bool drop_last = true;  // drop a final partial batch
  uint64_t seed = 42;
  SampleMode mode = SampleMode::train;
  Preprocess preprocess;  // the model's input and the crops to reach it
  int64_t workers = 1;    // threads assembling batches
  int64_t prefetch = 0;   // batches ready or in work ahead of the consumer; 0 = 2 per worker
  // The run's epochs: while epoch e ends (its last batches, then the evaluation after it), the
  // workers go on with epoch e + 1 < epochs, which start_epoch(e + 1) then takes as it is, so
  // a new epoch does not begin with the consumer waiting for its first batch (one worker
  // decodes a whole batch: ~0.5 s of 256 photos). 0: no look-ahead.
  int64_t epochs = 0;
  bool skip_bad_samples = false;  // leave unreadable samples out (counted) instead of failing
  // Data-parallel training (PyTorch's DistributedSampler with drop_last): every epoch's order
  // is cut to a multiple of shard_count samples and this loader serves every shard_count-th
  // one from shard_rank, so the shards are disjoint, equal in size, and together are the
  // global batches a single process would see at shard_count times the batch.
  int64_t shard_rank = 0;
  int64_t shard_count = 1;
  // Where batch images live; the default is ordinary host memory. A CUDA run passes pinned
  // memory so the upload can run asynchronously.
  std::function<Tensor(Shape, DType)> host_empty;
  // Image files decoded a batch at a time by this decoder (nvJPEG on the GPU) instead of one by
  // one on the workers, which then only read the files: the batch's images come back on the
  // decoder's device, with the same crops. Used for FileDatasets only; others ignore it.
  std::shared_ptr<BatchDecoder> batch_decoder;
  // 0: every worker hands its batch to batch_decoder. N > 0: at most N at once; a worker that
  // finds them all busy decodes its batch itself (host memory), so the CPU adds to the GPU's
  // rate. Which batch goes where then depends on timing, so the pixels of a batch may come from
  // either decoder (they differ by a level or two), unlike the order and the crops.
  int64_t batch_decoder_slots = 0;
};

// The sample order of an epoch and every sample's random crop are pure functions of (seed,
// epoch, sample), so a resumed run sees exactly the batches the interrupted one would have, and
// the number of workers changes nothing but the speed. One consumer thread only.
class DataLoader {
 public:
  // `dataset` must outlive the loader.
  DataLoader(const Dataset& dataset, LoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Starts (or restarts, abandoning the current one) epoch `epoch`, beginning at batch
  // `skip_batches` (0 <= skip_batches <= batches_per_epoch()) so a resumed run can start
  // mid-epoch. The epoch after the current one from its first batch continues what the
  // workers began ahead (LoaderOptions::epochs).
  void start_epoch(int64_t epoch, int64_t skip_batches = 0);
  // The next batch of the epoch, in order; false once the epoch is done. Rethrows a worker's
  // error (a bad sample without skip_bad_samples).
  bool next(Batch& batch);
  int64_t batches_per_epoch() const;
  int64_t batch_size() const { return options_.batch_size; }
  // The sample indices of epoch `epoch` in the order they are served (this shard's).
  std::vector<int64_t> epoch_order(int64_t epoch) const;
  // Samples per epoch: this shard's.
  int64_t samples_per_epoch() const;
  // Samples loaded and the workers' busy seconds in the current epoch: the loader's own
  // speed, images/s = samples / busy * workers, apart from how fast they are consumed.
  struct Stats {
    int64_t samples = 0;
    int64_t skipped = 0;
    double busy_seconds = 0;
  };
  Stats stats() const;
  // What the loader alone could deliver per second with its workers (0 before any batch).
  double images_per_second() const;

 private:
  // What assembling a batch of an epoch needs: its order and the seed of its crops, fixed once
  // made (workers share them).
  struct EpochPlan {
    std::shared_ptr<const std::vector<int64_t>> order;
    uint64_t seed = 0;  // the epoch's sample seeds derive from it
  };
  // One epoch's work: the batches finished and waiting for their turn, and where assembling
  // stands. An error stays with its epoch: one met ahead surfaces only once that epoch is served.
  struct EpochWork {
    int64_t epoch = -1;  // -1: none
    EpochPlan plan;
    std::map<int64_t, Batch> done;
    int64_t next_to_assemble = 0;
    int64_t end = 0;
    Stats stats;
    std::exception_ptr error;
  };
  EpochPlan plan_for(int64_t epoch) const;
  void stop_workers();
  void worker_main();
  // The epoch a worker starts its next batch from (mutex_ held): the current one, else the one
  // ahead; nullptr when no batch may be started now.
  EpochWork* work_to_start();
  Batch assemble(const EpochPlan& plan, int64_t batch_index, Stats& stats) const;
  // assemble() through options_.batch_decoder (datasets/loader_batch_decoder.cpp).
  Batch assemble_encoded(const EpochPlan& plan, int64_t batch_index, const FileDataset& files, Stats& stats) const;

  const Dataset& dataset_;
  LoaderOptions options_;
  bool started_ = false;

  std::vector<std::thread> workers_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;  // a batch was finished, or a worker failed
  std::condition_variable space_;  // the consumer took a batch, an epoch began, or stop_ was set
  EpochWork current_;              // the epoch being served
  EpochWork ahead_;                // the next one, begun while the current one ends
  int64_t next_to_serve_ = 0;      // in current_
  bool stop_ = false;
  mutable std::atomic<int64_t> decoder_busy_{0};  // workers in batch_decoder now
};

}  // namespace convoy
