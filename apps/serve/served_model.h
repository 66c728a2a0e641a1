#pragma once
// One served version of a model: its checkpoint loaded once per execution instance, the
// preprocessing and class names it carries, and the dynamic batcher that feeds the instances.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "apps/serve/metrics.h"
#include "apps/serve/model_config.h"
#include "datasets/preprocess.h"
#include "engine/core/engine_options.h"
#include "engine/core/tensor.h"
#include "engine/backends/eight_bit.h"
#include "engine/inference/inference_plan.h"

namespace convoy::serve {

using Clock = std::chrono::steady_clock;

// `from` plus `timeout_us`, cut to kMaxTimeoutUs; Clock::time_point::max() (no deadline) for 0
// or less.
inline Clock::time_point deadline_after(Clock::time_point from, int64_t timeout_us) {
  if (timeout_us <= 0) return Clock::time_point::max();
  return from + std::chrono::microseconds(timeout_us < kMaxTimeoutUs ? timeout_us : kMaxTimeoutUs);
}

// What a request gets back: the outputs for its samples, or why not.
struct InferResult {
  enum class Status { ok, invalid, unavailable, timeout, failed };  // invalid: the request's own data (a bad image)
  Status status = Status::ok;
  std::string error;
  std::vector<float> logits;         // (n, classes)
  std::vector<float> probabilities;  // (n, classes)
  // When its batch ran, for Triton's trace timestamps (trace.h): COMPUTE_START, COMPUTE_INPUT_END,
  // COMPUTE_OUTPUT_START, COMPUTE_END. Unset where the request's batch did not run.
  struct ComputeTimes {
    Clock::time_point start, input_end, output_start, end;
  };
  std::optional<ComputeTimes> compute = std::nullopt;
};

// One request's samples, queued for a batch. `input` is (n, C, H, W) on the CPU (or in a client's
// CUDA shared memory, on its GPU): u8 pixels (normalized with the checkpoint's mean and std; nhwc
// where the client sent them channels-last) or f32 values fed to the model as they are; or
// `encoded` holds the request's encoded images, which the instance decodes and preprocesses with
// the checkpoint's preprocessing (nvJPEG on a GPU, libjpeg-turbo/libpng on the CPU), never an I/O
// thread.
struct InferJob {
  Tensor input;  // (n, C, H, W) u8 or f32, maybe a view of shared memory; undefined when `encoded` holds the images
  std::vector<std::string> encoded;  // one JPEG or PNG file's bytes per sample
  Clock::time_point enqueued;
  Clock::time_point deadline = Clock::time_point::max();
  // Called once, from an instance thread; must not own the ServedVersion (see stop()).
  std::function<void(InferResult)> done;

  int64_t rows() const { return input.defined() ? input.dim(0) : static_cast<int64_t>(encoded.size()); }
  // Jobs batch together only with jobs of the same kind: u8 (channels first or last), f32 or encoded.
  int kind() const {
    return input.defined() ? 2 * static_cast<int>(input.dtype()) + (input.layout() == Layout::nhwc) : -1;
  }
};

// Bytes a version needs: every instance's parameters and buffers, plus the activations of a
// forward pass at max_batch_size (every layer's output kept: an upper bound; on a GPU the
// instances share one copy of the weights, so counting them per instance is one too). On the CPU, once
// the instances' inference plans are built, their measured bytes (arenas and reordered weights)
// take the activations' place.
struct MemoryEstimate {
  uint64_t weights = 0;      // per instance
  uint64_t activations = 0;  // per instance, at max_batch_size (0 where plans run it)
  uint64_t plans = 0;        // per instance: the CPU inference plans
  uint64_t total = 0;        // all instances
};

class ServedVersion {
 public:
  // Loads `checkpoint` once per instance on `config.device` and starts the instance threads. An
  // InputError/DeviceError when it cannot be read or run there, or when its memory estimate is
  // over `budget_left` bytes (0: no budget), before any instance is built. Runs with `engine`'s
  // tunables.
  ServedVersion(const ModelConfig& config, int64_t version, const std::string& checkpoint, uint64_t budget_left,
                MetricsRegistry& metrics, const EngineOptions& engine);
  ~ServedVersion();  // drains the queue and joins the instance threads
  ServedVersion(const ServedVersion&) = delete;
  ServedVersion& operator=(const ServedVersion&) = delete;

  // Queues a job; false (and `done` not called) when the queue is full or the version stops.
  bool submit(InferJob job);
  // Stops taking jobs; the queued ones still run. Joins the instance threads.
  void stop();

  const ModelConfig& config() const { return config_; }
  int64_t version() const { return version_; }
  const Shape& input_shape() const { return input_shape_; }  // (C, H, W)
  int64_t classes() const { return classes_; }
  const std::vector<std::string>& class_names() const { return class_names_; }
  const Preprocess& preprocess() const { return preprocess_; }
  const MemoryEstimate& memory() const { return memory_; }
  std::string device() const { return device_; }
  // How an instance runs a batch: "inference plans for batches 1, 2, 4 (3.4 MiB)" on the CPU
  // ("int8 inference plans ..." in reduced precision), or "layer by layer".
  const std::string& execution() const { return execution_; }
  size_t queued() const;
  // Distinct copies of the model the instances hold: one on a GPU (shared), one each on the CPU.
  size_t model_copies() const;

 private:
  struct Instance;
  struct Batch;
  void run_instance(Instance& instance);
  // Takes the jobs of the next batch (same input dtype, at most max_batch_size samples),
  // waiting up to max_queue_delay for more; empty when stopping with nothing queued, or, without
  // `wait_for_work`, when nothing is queued now.
  std::vector<InferJob> next_batch(bool wait_for_work);
  // Prepares `jobs` as one batch and runs it: on a GPU only queued (GraphedBatches::submit), so
  // the next batch is prepared while it runs; answer() waits for it and answers its jobs.
  Batch start(Instance& instance, std::vector<InferJob> jobs);
  void answer(Instance& instance, Batch& batch);
  // The jobs' tensors in one (n, C, H, W) batch; `first_row` gets each job's first row.
  Tensor assemble(Instance& instance, std::vector<InferJob>& jobs, std::vector<int64_t>& first_row);
  // The encoded images of `jobs` decoded and preprocessed into one (kept, C, H, W) u8 batch, on
  // the GPU with nvJPEG where the instance has it; a job with an unreadable image is answered here
  // (Status::invalid, naming the element), its `done` cleared and its first row -1.
  Tensor decode(Instance& instance, std::vector<InferJob>& jobs, std::vector<int64_t>& first_row);
  // Runs `work` where this version's device work runs: on the CPU thread (cpu_thread.h) for a
  // CPU version, else on the calling instance thread.
  void on_device(const std::function<void()>& work) const;
  // memory_.total from the weights and `per_instance` more bytes; an InputError naming them
  // (`what` max_batch_size) when that is over `budget_left` (0: no budget).
  void fit_budget(uint64_t budget_left, uint64_t per_instance, const std::string& what);
  // Puts the measured bytes of an instance's CPU inference plans in memory_ in place of the
  // activations' estimate; an InputError when the version no longer fits `budget_left`.
  void check_plan_memory(uint64_t plan_bytes, uint64_t budget_left);
  // The loaded version's gauges (memory, its budget, instances, device) in metrics_, as their owner.
  void publish_load_metrics();

  ModelConfig config_;
  int64_t version_;
  Shape input_shape_;  // (C, H, W)
  int64_t classes_ = 0;
  std::vector<std::string> class_names_;
  Preprocess preprocess_;
  MemoryEstimate memory_;
  std::string device_;
  std::string execution_ = "layer by layer";
  bool on_cpu_ = false;           // the instances run on the CPU
  bool nvjpeg_hardware_ = true;   // EngineOptions::nvjpeg_hardware, for the instances' nvJPEG
  bool planned_ = false;          // the instances run CPU inference plans (BatchedPlans)
  InferenceOptions plan_options_;  // and with these options
  std::shared_ptr<const EightBitGraph> eight_bit_;  // on a GPU in int8 or fp8: the 8-bit plan's steps
  ModelMetrics& metrics_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<InferJob> queue_;
  std::mutex model_forwards_;  // GPU: one instance at a time queues work through the shared model
  bool stopping_ = false;
  std::vector<std::unique_ptr<Instance>> instances_;
  std::vector<std::thread> threads_;
};

}  // namespace convoy::serve
