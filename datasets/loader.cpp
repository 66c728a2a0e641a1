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

DataLoader::EpochPlan DataLoader::plan_for(int64_t epoch) const {
  // The crops' seed apart from the shuffle's, so they do not repeat the order's random numbers.
  return {std::make_shared<const std::vector<int64_t>>(epoch_order(epoch)),
          counter_hash(counter_hash(options_.seed, 0xC0FFEE), static_cast<uint64_t>(epoch))};
}

void DataLoader::start_epoch(int64_t epoch, int64_t skip_batches) {
  const int64_t total = batches_per_epoch();
  if (skip_batches < 0 || skip_batches > total)
    throw InputError("cannot resume at batch " + std::to_string(skip_batches) + " of an epoch of " +
                     std::to_string(total) + " batches");
  {
    std::unique_lock lock(mutex_);
    if (started_ && skip_batches == 0 && ahead_.epoch == epoch) {
      // The workers began it ahead: it goes on as the current epoch.
      current_ = std::move(ahead_);
      ahead_ = EpochWork{};
      next_to_serve_ = 0;
      lock.unlock();
      space_.notify_all();
      return;
    }
  }
  stop_workers();
  started_ = false;  // until workers exist, so next() can never wait on nothing
  current_ = EpochWork{};
  current_.epoch = epoch;
  current_.plan = plan_for(epoch);
  current_.next_to_assemble = next_to_serve_ = skip_batches;
  current_.end = total;
  const int64_t later = epoch + 1 < options_.epochs ? total : 0;  // batches the workers may begin ahead
  const int64_t threads = std::min(options_.workers, std::max<int64_t>(1, total - skip_batches + later));
  for (int64_t i = 0; i < threads; ++i) workers_.emplace_back(&DataLoader::worker_main, this);
  started_ = true;
}

bool DataLoader::next(Batch& batch) {
  CONVOY_CHECK(started_, "DataLoader::next called before start_epoch");
  std::unique_lock lock(mutex_);
  if (next_to_serve_ >= current_.end) return false;
  ready_.wait(lock, [&] { return current_.done.count(next_to_serve_) || current_.error; });
  if (current_.error) std::rethrow_exception(current_.error);  // stays set: the epoch cannot go on
  auto it = current_.done.find(next_to_serve_);
  batch = std::move(it->second);
  current_.done.erase(it);
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
  current_ = EpochWork{};
  ahead_ = EpochWork{};
}

DataLoader::EpochWork* DataLoader::work_to_start() {
  // Bounded: never more than `prefetch` batches ahead of the consumer, done or in work, over
  // both epochs.
  const int64_t begun_ahead = ahead_.epoch >= 0 ? ahead_.next_to_assemble : 0;
  if (current_.error || current_.next_to_assemble - next_to_serve_ + begun_ahead >= options_.prefetch) return nullptr;
  if (current_.next_to_assemble < current_.end) return &current_;
  if (current_.epoch + 1 >= options_.epochs) return nullptr;
  if (ahead_.epoch != current_.epoch + 1) {
    ahead_ = EpochWork{};
    ahead_.epoch = current_.epoch + 1;
    ahead_.plan = plan_for(ahead_.epoch);  // once an epoch: milliseconds for a million samples
    ahead_.end = batches_per_epoch();
  }
  if (ahead_.error || ahead_.next_to_assemble >= ahead_.end) return nullptr;
  return &ahead_;
}

void DataLoader::worker_main() {
  using Clock = std::chrono::steady_clock;
  for (;;) {
    int64_t epoch = 0, b = 0;
    EpochPlan plan;
    {
      std::unique_lock lock(mutex_);
      EpochWork* work = nullptr;
      space_.wait(lock, [&] { return stop_ || (work = work_to_start()) != nullptr; });
      if (stop_) return;
      epoch = work->epoch;
      plan = work->plan;
      b = work->next_to_assemble++;
    }
    Stats stats;
    Batch batch;
    std::exception_ptr error;
    const auto start = Clock::now();
    try {
      batch = assemble(plan, b, stats);  // outside the lock: the other workers and the consumer go on
      stats.busy_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      // The epoch may have been left meanwhile (a restart, or another epoch than the one ahead).
      EpochWork* work = current_.epoch == epoch ? &current_ : ahead_.epoch == epoch ? &ahead_ : nullptr;
      if (work && error) {
        if (!work->error) work->error = error;
      } else if (work) {
        work->done.emplace(b, std::move(batch));
        work->stats.samples += stats.samples;
        work->stats.skipped += stats.skipped;
        work->stats.busy_seconds += stats.busy_seconds;
      }
    }
    ready_.notify_all();
    space_.notify_all();  // a failure wakes the other workers so they stop too
  }
}

DataLoader::Stats DataLoader::stats() const {
  std::lock_guard lock(mutex_);
  return current_.stats;
}

double DataLoader::images_per_second() const {
  const Stats s = stats();
  if (s.busy_seconds <= 0) return 0;
  return static_cast<double>(s.samples) / s.busy_seconds * static_cast<double>(workers_.size());
}

Batch DataLoader::assemble(const EpochPlan& plan, int64_t batch_index, Stats& stats) const {
  if (options_.batch_decoder)
    if (const auto* files = dynamic_cast<const FileDataset*>(&dataset_)) {
      if (options_.batch_decoder_slots <= 0) return assemble_encoded(plan, batch_index, *files, stats);
      struct Leave {
        std::atomic<int64_t>& busy;
        ~Leave() { --busy; }
      } leave{decoder_busy_};
      if (decoder_busy_++ < options_.batch_decoder_slots) return assemble_encoded(plan, batch_index, *files, stats);
    }
  const std::vector<int64_t>& order = *plan.order;
  const auto n = static_cast<int64_t>(order.size());
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
    const int64_t s = order[static_cast<size_t>(begin + i)];
    try {
      dataset_.load(s, p, options_.mode, counter_hash(plan.seed, static_cast<uint64_t>(s)),
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
