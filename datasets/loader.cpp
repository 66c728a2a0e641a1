#include "datasets/loader.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <utility>

#include "engine/core/counter_rng.h"
#include "engine/core/error.h"

namespace convoy {

DataLoader::DataLoader(const Dataset& dataset, LoaderOptions options)
    : dataset_(dataset), options_(std::move(options)) {
  if (options_.batch_size < 1)
    throw InputError("batch size must be at least 1, got " + std::to_string(options_.batch_size));
  if (options_.shard_count < 1 || options_.shard_rank < 0 || options_.shard_rank >= options_.shard_count)
    throw InputError("loader shard " + std::to_string(options_.shard_rank) + " of " +
                     std::to_string(options_.shard_count) + " does not exist");
  if (options_.workers < 1) throw InputError("loader workers must be at least 1, got " + std::to_string(options_.workers));
  if (options_.prefetch <= 0) options_.prefetch = 2 * options_.workers;
  if (!options_.host_empty) options_.host_empty = [](Shape shape, DType dtype) { return Tensor::empty(std::move(shape), dtype); };
}

DataLoader::~DataLoader() { stop_workers(); }

int64_t DataLoader::samples_per_epoch() const { return dataset_.size() / options_.shard_count; }

int64_t DataLoader::batches_per_epoch() const {
  const int64_t n = samples_per_epoch();
  const int64_t b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

std::vector<int64_t> DataLoader::epoch_order(int64_t epoch) const {
  const int64_t n = dataset_.size();
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  // Our own Fisher-Yates over mt19937_64 (whose output the standard fixes), not
  // std::shuffle, whose algorithm differs between standard libraries.
  std::mt19937_64 rng(counter_hash(options_.seed, static_cast<uint64_t>(epoch)));
  for (int64_t i = n - 1; options_.shuffle && i > 0; --i) {
    const auto j = static_cast<int64_t>(
        (static_cast<unsigned __int128>(rng()) * static_cast<uint64_t>(i + 1)) >> 64);
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  if (options_.shard_count == 1) return order;
  std::vector<int64_t> shard;
  shard.reserve(static_cast<size_t>(samples_per_epoch()));
  for (int64_t i = options_.shard_rank; i < samples_per_epoch() * options_.shard_count; i += options_.shard_count)
    shard.push_back(order[static_cast<size_t>(i)]);
  return shard;
}

void DataLoader::start_epoch(int64_t epoch, int64_t skip_batches) {
  const int64_t total = batches_per_epoch();
  if (skip_batches < 0 || skip_batches > total)
    throw InputError("cannot resume at batch " + std::to_string(skip_batches) + " of an epoch of " +
                     std::to_string(total) + " batches");
  stop_workers();
  started_ = false;  // until workers exist, so next() can never wait on nothing
  order_ = epoch_order(epoch);
  // Apart from the shuffle's seed, so the crops do not repeat the order's random numbers.
  epoch_seed_ = counter_hash(counter_hash(options_.seed, 0xC0FFEE), static_cast<uint64_t>(epoch));
  next_to_assemble_ = next_to_serve_ = skip_batches;
  end_batch_ = total;
  stats_ = {};
  const int64_t threads = std::min(options_.workers, std::max<int64_t>(1, total - skip_batches));
  for (int64_t i = 0; i < threads; ++i) workers_.emplace_back(&DataLoader::worker_main, this);
  started_ = true;
}

bool DataLoader::next(Batch& batch) {
  CONVOY_CHECK(started_, "DataLoader::next called before start_epoch");
  std::unique_lock lock(mutex_);
  if (next_to_serve_ >= end_batch_) return false;
  ready_.wait(lock, [&] { return done_.count(next_to_serve_) || error_; });
  if (error_) std::rethrow_exception(error_);  // stays set: the epoch cannot go on
  auto it = done_.find(next_to_serve_);
  batch = std::move(it->second);
  done_.erase(it);
  ++next_to_serve_;
  lock.unlock();
  space_.notify_all();
  return true;
}

void DataLoader::stop_workers() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  space_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  std::lock_guard lock(mutex_);
  stop_ = false;
  error_ = nullptr;
  done_.clear();
}

void DataLoader::worker_main() {
  using Clock = std::chrono::steady_clock;
  for (;;) {
    int64_t b = 0;
    {
      std::unique_lock lock(mutex_);
      // Bounded: never more than `prefetch` batches ahead of the consumer, done or in work.
      space_.wait(lock, [&] {
        return stop_ || error_ || next_to_assemble_ >= end_batch_ ||
               next_to_assemble_ < next_to_serve_ + options_.prefetch;
      });
      if (stop_ || error_ || next_to_assemble_ >= end_batch_) return;
      b = next_to_assemble_++;
    }
    Stats stats;
    const auto start = Clock::now();
    try {
      Batch batch = assemble(b, stats);  // outside the lock: the other workers and the consumer go on
      stats.busy_seconds = std::chrono::duration<double>(Clock::now() - start).count();
      std::lock_guard lock(mutex_);
      done_.emplace(b, std::move(batch));
      stats_.samples += stats.samples;
      stats_.skipped += stats.skipped;
      stats_.busy_seconds += stats.busy_seconds;
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    ready_.notify_all();
    space_.notify_all();  // a failure wakes the other workers so they stop too
  }
}

DataLoader::Stats DataLoader::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

double DataLoader::images_per_second() const {
  const Stats s = stats();
  if (s.busy_seconds <= 0) return 0;
  return static_cast<double>(s.samples) / s.busy_seconds * static_cast<double>(workers_.size());
}

Batch DataLoader::assemble(int64_t batch_index, Stats& stats) const {
  if (options_.batch_decoder)
    if (const auto* files = dynamic_cast<const FileDataset*>(&dataset_)) {
      if (options_.batch_decoder_slots <= 0) return assemble_encoded(batch_index, *files, stats);
      struct Leave {
        std::atomic<int64_t>& busy;
        ~Leave() { --busy; }
      } leave{decoder_busy_};
      if (decoder_busy_++ < options_.batch_decoder_slots) return assemble_encoded(batch_index, *files, stats);
    }
  const auto n = static_cast<int64_t>(order_.size());
  const int64_t begin = batch_index * options_.batch_size;
  const int64_t count = std::min(options_.batch_size, n - begin);
  const Preprocess& p = options_.preprocess;
  const int64_t row = p.channels * p.height * p.width;
  Batch batch;
  batch.index = batch_index;
  batch.images = options_.host_empty({count, p.channels, p.height, p.width}, DType::u8);
  std::vector<int32_t> labels;
  labels.reserve(static_cast<size_t>(count));
  uint8_t* dst = batch.images.data<uint8_t>();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t s = order_[static_cast<size_t>(begin + i)];
    try {
      dataset_.load(s, p, options_.mode, counter_hash(epoch_seed_, static_cast<uint64_t>(s)),
                    dst + static_cast<int64_t>(labels.size()) * row);
    } catch (const BadSampleError&) {
      if (!options_.skip_bad_samples) throw;
      ++batch.skipped;
      continue;
    }
    labels.push_back(dataset_.label(s));
  }
  const auto kept = static_cast<int64_t>(labels.size());
  if (kept < count) batch.images = batch.images.slice_rows(0, kept);
  batch.labels = Tensor::empty({kept}, DType::i32);
  std::copy(labels.begin(), labels.end(), batch.labels.data<int32_t>());
  stats.samples = kept;
  stats.skipped = batch.skipped;
  return batch;
}

}  // namespace convoy
