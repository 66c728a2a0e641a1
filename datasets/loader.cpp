#include "datasets/loader.h"

#include <cstring>
#include <random>
#include <utility>

#include "engine/core/counter_rng.h"
#include "engine/core/error.h"

namespace convoy {

DataLoader::DataLoader(const Dataset& dataset, int64_t batch_size, bool shuffle, bool drop_last,
                       uint64_t seed)
    : dataset_(dataset), batch_size_(batch_size), shuffle_(shuffle), drop_last_(drop_last), seed_(seed) {
  if (batch_size < 1)
    throw InputError("batch size must be at least 1, got " + std::to_string(batch_size));
  const Tensor& im = dataset.images;
  const Tensor& lb = dataset.labels;
  CONVOY_CHECK(im.defined() && lb.defined(), "dataset '" + dataset.name + "' has no tensors");
  CONVOY_CHECK(im.ndim() == 4 && im.dtype() == DType::u8 && im.device().is_cpu(),
               "dataset images must be (N, C, H, W) u8 on the CPU");
  CONVOY_CHECK(lb.ndim() == 1 && lb.dtype() == DType::i32 && lb.device().is_cpu(),
               "dataset labels must be (N) i32 on the CPU");
  CONVOY_CHECK(im.dim(0) == lb.dim(0), "dataset images and labels differ in count");
}

DataLoader::~DataLoader() { stop_worker(); }

int64_t DataLoader::batches_per_epoch() const {
  const int64_t n = dataset_.size();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

std::vector<int64_t> DataLoader::epoch_order(int64_t epoch) const {
  const int64_t n = dataset_.size();
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  if (!shuffle_) return order;
  // Our own Fisher-Yates over mt19937_64 (whose output the standard fixes), not
  // std::shuffle, whose algorithm differs between standard libraries.
  std::mt19937_64 rng(counter_hash(seed_, static_cast<uint64_t>(epoch)));
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(
        (static_cast<unsigned __int128>(rng()) * static_cast<uint64_t>(i + 1)) >> 64);
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

void DataLoader::start_epoch(int64_t epoch, int64_t skip_batches) {
  const int64_t total = batches_per_epoch();
  if (skip_batches < 0 || skip_batches > total)
    throw InputError("cannot resume at batch " + std::to_string(skip_batches) + " of an epoch of " +
                     std::to_string(total) + " batches");
  stop_worker();
  started_ = false;  // until a worker exists, so next() can never wait on nothing
  order_ = epoch_order(epoch);
  worker_ = std::thread(&DataLoader::worker_main, this, skip_batches, total);
  started_ = true;
}

bool DataLoader::next(Batch& batch) {
  CONVOY_CHECK(started_, "DataLoader::next called before start_epoch");
  std::unique_lock lock(mutex_);
  ready_.wait(lock, [&] { return !queue_.empty() || finished_ || error_; });
  if (!queue_.empty()) {
    batch = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    space_.notify_one();
    return true;
  }
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return false;
}

void DataLoader::stop_worker() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  space_.notify_all();
  if (worker_.joinable()) worker_.join();
  std::lock_guard lock(mutex_);
  stop_ = false;
  finished_ = false;
  error_ = nullptr;
  queue_.clear();
}

void DataLoader::worker_main(int64_t first_batch, int64_t end_batch) {
  try {
    for (int64_t b = first_batch; b < end_batch; ++b) {
      {
        std::unique_lock lock(mutex_);
        space_.wait(lock, [&] { return stop_ || queue_.size() < kQueueDepth; });
        if (stop_) return;
      }
      Batch batch = assemble(b);  // outside the lock: the consumer keeps going meanwhile
      {
        std::lock_guard lock(mutex_);
        if (stop_) return;
        queue_.push_back(std::move(batch));
      }
      ready_.notify_one();
    }
  } catch (...) {
    std::lock_guard lock(mutex_);
    error_ = std::current_exception();
  }
  {
    std::lock_guard lock(mutex_);
    finished_ = true;
  }
  ready_.notify_all();
}

Batch DataLoader::assemble(int64_t batch_index) const {
  const int64_t n = dataset_.size();
  const int64_t begin = batch_index * batch_size_;
  const int64_t count = std::min(batch_size_, n - begin);
  const Tensor& im = dataset_.images;  // (N, C, H, W)
  const size_t row = static_cast<size_t>(im.dim(1) * im.dim(2) * im.dim(3));
  Batch batch;
  batch.index = batch_index;
  batch.images = Tensor::empty({count, im.dim(1), im.dim(2), im.dim(3)}, DType::u8);
  batch.labels = Tensor::empty({count}, DType::i32);
  const uint8_t* src_images = im.data<uint8_t>();
  const int32_t* src_labels = dataset_.labels.data<int32_t>();
  uint8_t* dst_images = batch.images.data<uint8_t>();
  int32_t* dst_labels = batch.labels.data<int32_t>();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t s = order_[static_cast<size_t>(begin + i)];
    std::memcpy(dst_images + static_cast<size_t>(i) * row, src_images + static_cast<size_t>(s) * row, row);
    dst_labels[i] = src_labels[s];
  }
  return batch;
}

}  // namespace convoy
