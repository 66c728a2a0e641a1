#include "apps/serve/served_model.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <iostream>
#include <optional>

#include "apps/serve/cpu_thread.h"
#include "apps/serve/served_instance.h"
#include "datasets/nvjpeg.h"
#include "engine/backends/backend.h"
#include "engine/bundle/inference_precision.h"
#include "engine/bundle/run_checkpoint.h"
#include "engine/core/error.h"
#include "engine/graph/model.h"
#include "engine/inference/batched_plans.h"
#include "engine/inference/eight_bit_graph.h"
#include "engine/inference/graphed_batches.h"
#include "engine/ops/normalize_augment.h"

namespace convoy::serve {

namespace {

std::string mib(uint64_t bytes) {
  if (bytes < 1048576) return std::to_string(bytes) + " bytes";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / 1048576.0);
  return text;
}

// The CPU inference plans' options: the config's `precision` (engine/bundle/inference_precision.h),
// refused with the reason where it cannot run, in the config's terms, before the version is ready.
InferenceOptions plan_options(const ModelConfig& config, const std::string& what, const RunCheckpointInfo& info,
                              Model& model, const Backend& backend, const std::string& checkpoint) {
  PrecisionRequest request;
  request.asked = config.precision;
  request.trained = info.precision;
  if (!info.int8_activation_max.empty()) {
    request.quantized_for = info.quantization.device;
    request.quantized_type = info.quantization.type;
  }
  request.check_plans_now = true;
  request.words.subject = what;
  request.words.use_cpu = "set device: cpu";
  request.words.fp32_on_gpu = ", or precision: fp32 to serve this int8 checkpoint's fp32 weights on the GPU";
  request.words.not_int8 = "int8 inference: " + checkpoint + " is not an int8 checkpoint (no calibrated ranges); "
                           "make one with convoy quantize";
  InferenceOptions o =
      choose_inference_precision(request, model, info.int8_activation_max, backend.device(), checkpoint);
  o.threads = static_cast<int>(config.threads);
  o.flops_per_thread = kFlopsPerThread;
  return o;
}

}  // namespace

// A batch between start() and answer().
struct ServedVersion::Batch {
  std::vector<InferJob> jobs;
  std::vector<int64_t> first_row;  // by job: where its rows start in the batch; -1: answered already
  Clock::time_point start;
  Clock::time_point inputs_ready;  // assembled or decoded on the host (the statistics' compute_input)
  std::optional<GraphedBatches::Pending> queued;  // on a GPU: the forward still running
  std::vector<float> logits, probs;                // (rows, classes), once it ran
  std::string error;                               // why it failed, if it did
};

ServedVersion::ServedVersion(const ModelConfig& config, int64_t version, const std::string& checkpoint,
                             uint64_t budget_left, MetricsRegistry& metrics, const EngineOptions& engine)
    : config_(config), version_(version), nvjpeg_hardware_(engine.nvjpeg_hardware),
      metrics_(metrics.get(config.name, version)) {
  RunCheckpoint ckpt = read_run_checkpoint(checkpoint, CheckpointUse::inference);
  {
    const Model probe = Model::from_yaml(ckpt.info.model_yaml, checkpoint + " (model_yaml)", 0);
    check_checkpoint_fits_model(ckpt.info, probe, checkpoint);
    input_shape_ = probe.input_shape();
    classes_ = probe.num_classes();
    memory_.weights = static_cast<uint64_t>(probe.parameter_count() + probe.buffer_count()) * sizeof(float);
    memory_.activations = static_cast<uint64_t>(probe.activation_count() + shape_numel(input_shape_)) *
                          static_cast<uint64_t>(config_.max_batch_size) * sizeof(float);
  }
  fit_budget(budget_left, memory_.activations, "activations at batch");
  if (static_cast<int64_t>(ckpt.info.class_names.size()) != classes_)
    throw InputError(checkpoint + ": " + std::to_string(ckpt.info.class_names.size()) +
                     " class names for a model with " + std::to_string(classes_) + " outputs");
  class_names_ = ckpt.info.class_names;
  if (ckpt.info.preprocess) {
    preprocess_ = *ckpt.info.preprocess;
    if (preprocess_.channels != input_shape_[0] || preprocess_.height != input_shape_[1] ||
        preprocess_.width != input_shape_[2])
      throw InputError(checkpoint + ": checkpoint metadata 'preprocess' does not match the model's input " +
                       shape_str(input_shape_));
  } else {
    preprocess_.channels = input_shape_[0];
    preprocess_.height = input_shape_[1];
    preprocess_.width = input_shape_[2];
  }
  BackendOptions options;
  options.threads = static_cast<int>(config_.threads);
  options.cuda = engine.cuda;
  // The device must have room too: a load that would not fit is refused before any instance is
  // built, and the models already served keep theirs.
  std::unique_ptr<Backend> first = select_backend(config_.device, options, std::cerr);
  if (const uint64_t free = first->free_memory(); free != 0 && memory_.total > free)
    throw InputError("model '" + config_.name + "' version " + std::to_string(version) + " needs about " +
                     mib(memory_.total) + " (" + std::to_string(config_.instance_count) + " instance(s) at batch " +
                     std::to_string(config_.max_batch_size) + "), more than the " + mib(free) + " free on " +
                     first->device().str() + "; not loaded (fewer instances or a smaller max_batch_size)");
  for (int64_t i = 0; i < config_.instance_count; ++i) {
    auto instance = std::make_unique<Instance>();
    instance->backend = i == 0 ? std::move(first) : select_backend(config_.device, options, std::cerr);
    instance->normalize = make_normalize(ckpt.info.mean, ckpt.info.std);
    if (i > 0 && !on_cpu_) {  // the first instance's model, weights and all (same GPU: device pointers hold)
      if (instance->backend->device() != instances_.front()->backend->device())
        throw InputError("model '" + config_.name + "': its instances must share one GPU");
      instance->model = instances_.front()->model;
      instances_.push_back(std::move(instance));
      continue;
    }
    instance->model = std::make_shared<Model>(
        Model::from_yaml(ckpt.info.model_yaml, checkpoint + " (model_yaml)", 0));
    instance->model->load_state(ckpt.tensors, checkpoint);
    instance->model->set_fusion(engine.fusion);
    instance->model->to(*instance->backend, DType::f32);
    if (i == 0) {  // every instance is the same model on the same kind of device
      on_cpu_ = instance->backend->device().is_cpu();
      planned_ = on_cpu_ && InferencePlan::unsupported_reason(*instance->model).empty();
      plan_options_ = plan_options(config_, "model '" + config_.name + "' version " + std::to_string(version),
                                   ckpt.info, *instance->model, *instance->backend, checkpoint);
      plan_options_.winograd = engine.winograd;
      plan_options_.layout = engine.plan_layout;
      plan_options_.adaptive_team = engine.adaptive_team;
      // TF32 is the backend's math (cuDNN tensor-op math, cuBLAS TF32): backends made with it.
      if (!on_cpu_ && plan_options_.precision == Precision::tf32) {
        options.tf32 = true;
        instance->backend = select_backend(config_.device, options, std::cerr);
      }
    }
    if (!on_cpu_) {  // in the precision's dtype, in the backend's layout for it (channels-last for tensor cores)
      const Precision p = plan_options_.precision;
      const DType dtype = p == Precision::bf16 || is_eight_bit(p) ? DType::bf16 : DType::f32;  // 8-bit: its bf16 steps'
      instance->model->to(*instance->backend, dtype, instance->backend->preferred_layout(dtype));
      if (is_eight_bit(p))
        eight_bit_ = std::make_shared<const EightBitGraph>(
            eight_bit_graph(*instance->model, plan_options_.activation_max, eight_bit_type(p)));
    }
    instances_.push_back(std::move(instance));
  }
  device_ = instances_.front()->backend->device().str();
  // One instance at a time: the first one's plans are measured against the budget before the
  // others build theirs.
  for (size_t i = 0; i < instances_.size(); ++i) {
    Instance& instance = *instances_[i];
    std::future<void> ready = instance.ready.get_future();
    threads_.emplace_back([this, &instance] { run_instance(instance); });
    try {
      ready.get();
      if (i == 0 && instance.plans) {
        check_plan_memory(instance.plans->bytes(), budget_left);
        const Precision p = plan_options_.precision;
        execution_ = p == Precision::fp32 ? "" : std::string(to_string(p)) + " ";
        execution_ += "inference plans for batches";
        for (int64_t size : instance.plans->sizes()) execution_ += (size == 1 ? " " : ", ") + std::to_string(size);
        execution_ += " (" + mib(instance.plans->bytes()) + ")";
      }
      if (i == 0 && instance.graphed) {
        execution_ = std::string(to_string(plan_options_.precision)) + " recorded forwards (CUDA graphs) for batches";
        for (int64_t size : instance.graphed->sizes()) execution_ += (size == 1 ? " " : ", ") + std::to_string(size);
        if (const int folded = instance.model->folded_batch_norms())
          execution_ += "; " + std::to_string(folded) + " batch norms folded into their convolutions";
        if (const CompiledForward* plan = instance.graphed->eight_bit_plan())
          execution_ += "; the 8-bit plan runs " + std::to_string(plan->eight_bit_convolutions()) +
                        " convolutions in " + to_string(plan_options_.precision);
      }
    } catch (...) {
      stop();
      throw;
    }
  }
  publish_load_metrics();
}

void ServedVersion::publish_load_metrics() {
  metrics_.memory_bytes = memory_.total;
  metrics_.memory_budget_bytes = config_.max_memory;
  metrics_.instance_count = config_.instance_count;
  metrics_.cuda_device = on_cpu_ ? -1 : instances_.front()->backend->device().index;
  metrics_.loaded_by = this;
}

void ServedVersion::fit_budget(uint64_t budget_left, uint64_t per_instance, const std::string& what) {
  memory_.total = (memory_.weights + per_instance) * static_cast<uint64_t>(config_.instance_count);
  if (budget_left != 0 && memory_.total > budget_left)
    throw InputError("model '" + config_.name + "' version " + std::to_string(version_) + " needs about " +
                     mib(memory_.total) + " (" + std::to_string(config_.instance_count) + " instance(s) x (" +
                     mib(memory_.weights) + " weights + " + mib(per_instance) + " " + what + " " +
                     std::to_string(config_.max_batch_size) + ")), over the " + mib(budget_left) +
                     " left of its max_memory " + mib(config_.max_memory) + "; not loaded");
}

void ServedVersion::check_plan_memory(uint64_t plan_bytes, uint64_t budget_left) {
  memory_.plans = plan_bytes;
  memory_.activations = 0;
  fit_budget(budget_left, memory_.plans, "of CPU inference plans up to batch");
}

ServedVersion::~ServedVersion() { stop(); }

void ServedVersion::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) {
    if (!t.joinable()) continue;
    // An instance thread cannot join itself, nor go on running in a destroyed version: a
    // completion (InferJob::done) that owned its version and dropped the last reference would
    // do both. Completions own none; a bug that breaks that stops here, not in a use after free.
    if (t.get_id() == std::this_thread::get_id()) {
      std::fprintf(stderr, "convoy: internal error: model '%s' version %lld stopped from its own instance thread\n",
                   config_.name.c_str(), static_cast<long long>(version_));
      std::abort();
    }
    t.join();
  }
  // A reload builds the new version before the old one stops, and both count in the same metrics:
  // the old one's stop leaves the new one's gauges alone.
  const void* self = this;
  if (metrics_.loaded_by.compare_exchange_strong(self, nullptr)) {
    metrics_.memory_bytes = 0;
    metrics_.memory_budget_bytes = 0;
    metrics_.instance_count = 0;
    metrics_.cuda_device = -1;
  }
}

size_t ServedVersion::model_copies() const {
  std::vector<const Model*> seen;
  for (const auto& instance : instances_)
    if (instance->model && std::find(seen.begin(), seen.end(), instance->model.get()) == seen.end())
      seen.push_back(instance->model.get());
  return seen.size();
}

void ServedVersion::on_device(const std::function<void()>& work) const {
  if (on_cpu_)
    run_on_cpu_thread(work);
  else
    work();
}

void ServedVersion::run_instance(Instance& instance) {
  // On the CPU the plans are built, run and freed on the one CPU thread (cpu_thread.h): oneDNN
  // partitions a primitive's work for the OpenMP team it is made under, and its scratchpads are
  // per thread.
  try {
    if (planned_)
      on_device([&] {
        instance.plans = std::make_unique<BatchedPlans>(*instance.model, config_.max_batch_size, plan_options_);
      });
    if (!on_cpu_) {
      {
        std::lock_guard forwards(model_forwards_);  // records through the shared model
        instance.graphed = std::make_unique<GraphedBatches>(*instance.backend, *instance.model,
                                                            config_.max_batch_size, instance.normalize,
                                                            eight_bit_.get());
      }
      // Made now, not for the first encoded images: starting nvJPEG takes about half a second.
      if (nvjpeg_unavailable_reason().empty()) {
        try {
          instance.decoder = make_nvjpeg_batch_decoder(instance.backend->device().index, nvjpeg_hardware_);
        } catch (const DeviceError& e) {
          std::cerr << "convoy serve: model '" << config_.name << "': nvJPEG could not start (" << e.what()
                    << "); images are decoded on the CPU\n";
        }
      }
    }
    instance.ready.set_value();
  } catch (...) {
    instance.ready.set_exception(std::current_exception());
  }
  // On a GPU two batches are in flight: the next one is prepared and queued while the device
  // runs the last, which is answered after. On the CPU a batch is answered as soon as it ran.
  std::optional<Batch> running;
  for (;;) {
    // An idle GPU instance looks for work for a while before it sleeps: a request that comes in
    // meanwhile (the next one of a client that waited for its reply) starts without a thread
    // wake-up, tens of microseconds of a batch-1 request's time. The CPU thread polls likewise.
    if (!on_cpu_ && !running) {
      const Clock::time_point give_up = Clock::now() + std::chrono::microseconds(500);
      // The queue's gauge, kept with the queue under its lock, read here without it.
      while (metrics_.queue_size.load(std::memory_order_relaxed) == 0 && Clock::now() < give_up)
        std::this_thread::yield();
    }
    std::vector<InferJob> jobs = next_batch(/*wait_for_work=*/!running);
    if (jobs.empty() && !running) {
      std::unique_lock lock(mutex_);
      if (!stopping_ || !queue_.empty()) continue;
      lock.unlock();
      // Freed on the thread that ran them: oneDNN keeps a scratchpad per thread that ran its
      // primitives, released when the last primitive goes on that thread (it would leak otherwise).
      on_device([&] {
        instance.plans.reset();
        instance.graphed.reset();
        instance.model.reset();
        instance.backend.reset();
      });
      return;
    }
    std::optional<Batch> next;
    if (!jobs.empty()) next = start(instance, std::move(jobs));
    if (running) answer(instance, *running);
    running = std::move(next);
    if (running && !running->queued) {
      answer(instance, *running);
      running.reset();
    }
  }
}

ServedVersion::Batch ServedVersion::start(Instance& instance, std::vector<InferJob> jobs) {
  Batch b;
  b.jobs = std::move(jobs);
  b.start = b.inputs_ready = Clock::now();
  try {
    on_device([&] {
      const Tensor batch = b.jobs.front().input.defined() ? assemble(instance, b.jobs, b.first_row)
                                                          : decode(instance, b.jobs, b.first_row);
      b.inputs_ready = Clock::now();
      if (!batch.defined()) return;  // every image was unreadable
      if (instance.graphed) {
        // A replay touches no model state; the lock covers a recording made again (a stale one).
        std::lock_guard forwards(model_forwards_);
        b.queued = instance.graphed->submit(batch);
        return;
      }
      Backend& backend = *instance.backend;
      Model& model = *instance.model;
      Tensor x;
      if (batch.dtype() == DType::u8) {
        const Tensor images = backend.upload(batch);
        x = backend.empty(batch.shape(), model.compute_dtype(), model.layout());  // (N, C, H, W)
        backend.ops().normalize_augment(images, instance.normalize, 0, x);
      } else {
        x = backend.upload(batch);
      }
      const Tensor out = instance.plans ? instance.plans->run(x) : model.forward(backend, x, StepInfo{});  // (N, classes)
      Tensor p = backend.empty(out.shape(), DType::f32);
      backend.ops().softmax(out, p);
      b.logits = out.to_floats();
      b.probs = p.to_floats();
    });
  } catch (const std::exception& e) {
    b.error = std::string("inference failed: ") + e.what();
    b.queued.reset();
  }
  return b;
}

void ServedVersion::answer(Instance& instance, Batch& b) {
  if (b.queued) {
    try {
      instance.graphed->finish(*b.queued, b.logits, b.probs);
    } catch (const std::exception& e) {
      b.error = std::string("inference failed: ") + e.what();
    }
    b.queued.reset();
  }
  const Clock::time_point end = Clock::now();
  // Each job's rows out of the batch's outputs first, then the statistics (metrics.h), then the
  // answers: a client that has its answer sees its batch counted. An execution counts when it ran
  // (Triton's execution_count): not a failed one, nor a batch of images none of which decoded.
  std::vector<InferResult> results(b.jobs.size());
  int64_t rows = 0;
  for (size_t i = 0; i < b.jobs.size() && b.error.empty(); ++i) {
    if (!b.jobs[i].done) continue;  // answered by decode(); else assemble() or decode() gave it its first row
    const int64_t m = b.jobs[i].rows();
    const auto begin = static_cast<long>(b.first_row[i] * classes_), stop = static_cast<long>((b.first_row[i] + m) * classes_);
    results[i].logits.assign(b.logits.begin() + begin, b.logits.begin() + stop);
    results[i].probabilities.assign(b.probs.begin() + begin, b.probs.begin() + stop);
    rows += m;
  }
  const Clock::time_point outputs_done = Clock::now();
  const uint64_t input_ns = ns_of(b.inputs_ready - b.start), infer_ns = ns_of(end - b.inputs_ready),
                 output_ns = ns_of(outputs_done - end);
  if (rows > 0) {
    metrics_.exec_count++;
    metrics_.record_batch(rows, input_ns, infer_ns, output_ns);
  }
  for (size_t i = 0; i < b.jobs.size(); ++i) {
    InferJob& j = b.jobs[i];
    if (!j.done) continue;
    metrics_.record_request(ns_of(b.start - j.enqueued), input_ns, infer_ns, output_ns);
    if (!b.error.empty()) {
      metrics_.request_failure++;
      j.done({InferResult::Status::failed, b.error, {}, {}});
      continue;
    }
    metrics_.inference_count += static_cast<uint64_t>(j.rows());
    results[i].compute = InferResult::ComputeTimes{b.start, b.inputs_ready, end, outputs_done};
    j.done(std::move(results[i]));
  }
}

}  // namespace convoy::serve
