// The communicators without a network: the world of one process, and the simulated world of
// threads the tests run a data-parallel step in.
#include <barrier>
#include <cstring>
#include <mutex>

#include "engine/core/error.h"
#include "engine/distributed/communicator.h"

namespace convoy {

int64_t Communicator::sum(Backend& backend, int32_t value) {
  if (world_size() == 1) return value;
  Tensor t = backend.upload(Tensor::from_ints({value}, {1}));
  if (t.device() == Device::cpu()) t = t.clone();  // from_ints' own buffer may be shared
  Tensor one[] = {t};
  all_reduce(one, ReduceOp::sum);
  wait();
  return t.to_cpu().data<int32_t>()[0];
}

bool Communicator::any(Backend& backend, bool flag) { return sum(backend, flag ? 1 : 0) > 0; }

std::unique_ptr<Communicator> make_communicator(Backend& backend, const WorldInfo& world,
                                                const CommunicatorOptions& options) {
  if (!world.distributed()) return make_local_communicator();
  return make_nccl_communicator(backend, world, options);
}

namespace {

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string describe() const override { return "a single process"; }
  void all_reduce(std::span<Tensor>, ReduceOp) override {}
  void broadcast(Tensor&, int) override {}
  void wait() override {}
  void barrier() override {}
};

// What the threads of a simulated world share.
struct ThreadWorld {
  explicit ThreadWorld(int size) : size(size), sync(size) {}
  const int size;
  std::barrier<> sync;
  std::mutex mutex;
  std::vector<double> acc;  // the collective in progress
};

void check_cpu(const Tensor& t) {
  CONVOY_CHECK(t.device().is_cpu(), "the thread world reduces CPU tensors only");
  CONVOY_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::i32, "all_reduce of f32 or i32 tensors only");
}

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<ThreadWorld> world, int rank) : world_(std::move(world)), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_->size; }
  std::string describe() const override { return std::to_string(world_->size) + " threads (simulated)"; }

  void all_reduce(std::span<Tensor> tensors, ReduceOp op) override {
    size_t n = 0;
    for (const Tensor& t : tensors) check_cpu(t), n += static_cast<size_t>(t.numel());
    world_->sync.arrive_and_wait();  // the previous collective is done everywhere
    {
      std::lock_guard lock(world_->mutex);
      if (world_->acc.empty()) world_->acc.assign(n, 0.0);
      CONVOY_CHECK(world_->acc.size() == n, "ranks reduce buckets of different sizes");
      size_t k = 0;
      for (const Tensor& t : tensors)
        for (int64_t i = 0; i < t.numel(); ++i, ++k)
          world_->acc[k] += t.dtype() == DType::f32 ? static_cast<double>(t.data<float>()[i])
                                                    : static_cast<double>(t.data<int32_t>()[i]);  // not via float
    }
    world_->sync.arrive_and_wait();  // every rank has added its part
    const double scale = op == ReduceOp::avg ? 1.0 / world_->size : 1.0;
    size_t k = 0;
    for (Tensor& t : tensors)
      for (int64_t i = 0; i < t.numel(); ++i, ++k) {
        if (t.dtype() == DType::f32) t.data<float>()[i] = static_cast<float>(world_->acc[k] * scale);
        else t.data<int32_t>()[i] = static_cast<int32_t>(world_->acc[k] * scale);
      }
    world_->sync.arrive_and_wait();  // every rank has read the result
    if (rank_ == 0) world_->acc.clear();  // before rank 0 arrives at the next collective
  }

  void broadcast(Tensor& tensor, int root) override {
    Tensor t[] = {tensor};
    if (rank_ != root) {
      check_cpu(tensor);
      tensor.zero_();  // the sum is then the root's values
    }
    all_reduce(t, ReduceOp::sum);
  }
  void wait() override {}
  void barrier() override { world_->sync.arrive_and_wait(); }

 private:
  std::shared_ptr<ThreadWorld> world_;
  int rank_;
};

}  // namespace

std::unique_ptr<Communicator> make_local_communicator() { return std::make_unique<LocalCommunicator>(); }

std::vector<std::unique_ptr<Communicator>> make_thread_world(int size) {
  CONVOY_CHECK(size >= 1, "a world of at least one rank");
  auto world = std::make_shared<ThreadWorld>(size);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(std::make_unique<ThreadCommunicator>(world, r));
  return ranks;
}

}  // namespace convoy
