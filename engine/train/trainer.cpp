#include "engine/train/trainer.h"

#include "engine/train/training_run.h"

namespace convoy {
namespace training {

namespace {
bool has_step(const std::vector<int64_t>& steps, int64_t step) {
  return std::find(steps.begin(), steps.end(), step) != steps.end();
}
}  // namespace


TrainResult TrainingRun::run() {
  try {
    return run_epochs();
  } catch (const OutOfMemoryError& e) {
    // The allocator knows the bytes; the user needs the knobs that shrink them.
    throw OutOfMemoryError(std::string(e.what()) + " while training with batch_size " +
                           std::to_string(config_.batch_size) + " in " +
                           (dtype_ == DType::bf16 ? "bf16" : "fp32") + ": try a smaller batch_size" +
                           (dtype_ == DType::bf16 ? "" : " or precision: bf16") +
                           "; the last checkpoint is intact");
  } catch (const DeviceError& e) {
    // A lost GPU, an ECC or Xid error: the device's memory cannot be trusted or read, so nothing
    // is saved from it (a CUDA context's errors are sticky anyway); the checkpoints on disk are
    // those of the last good epoch, written whole or not at all.
    std::ostringstream out;
    // After pos_.step steps queued: on a GPU the fault surfaces at a later check or read-back.
    out << "epoch " << pos_.epoch + 1 << ", after " << pos_.step << " steps: the device failed: " << e.what()
        << ". Training stopped without saving from the failed device. " << kept_checkpoint()
        << "; check the GPU (nvidia-smi, Xid errors in the kernel log) and continue with --resume";
    throw DeviceError(out.str());
  }
}

TrainResult TrainingRun::run_epochs() {
  if (lead()) remove_stale_temporaries(run_dir_, log_);
  resume();
  if (!options_.init_weights.empty() && pos_.step > 0)
    log_ << "--init-weights " << options_.init_weights << " not used: the run resumes with its own weights" << std::endl;
  else if (!options_.init_weights.empty())
    load_init_weights(config_, model_, *backend_, options_.init_weights, options_.init_weights_strict, log_);
  log_start();
  LoaderOptions train_options = train_loader_options(config_, *train_data_, preprocess_);
  train_options.shard_rank = comm_->rank();
  train_options.shard_count = comm_->world_size();
  train_options.host_empty = [this](Shape shape, DType dtype) { return uploader_->host_empty(std::move(shape), dtype); };
  train_options.batch_decoder = training_batch_decoder(config_, options_.engine, *train_data_, *backend_, log_);
  train_options.batch_decoder_slots = config_.dataset.nvjpeg_workers;
  DataLoader loader(*train_data_, train_options);
  LoaderOptions test_options = eval_loader_options(preprocess_, std::max<int64_t>(config_.batch_size, 256),
                                                   loader_workers(config_, *test_data_));
  test_options.skip_bad_samples = config_.dataset.skip_bad_images;  // on_bad_image covers both splits
  DataLoader test_loader(*test_data_, test_options);
  test_loader_ = &test_loader;
  batches_ = loader.batches_per_epoch();
  if (batches_ == 0)
    throw InputError(config_.source + ": batch_size " + std::to_string(config_.batch_size) +
                     (comm_->world_size() > 1 ? " x " + std::to_string(comm_->world_size()) + " ranks" : "") +
                     " is larger than the " + std::to_string(train_data_->size()) + " training images");
  total_steps_ = batches_ * config_.epochs;
  if (resumed_global_batch_ && resumed_global_batch_ != global_batch_) {
    // Another number of GPUs: the same epoch, its position in whole batches of the new size.
    pos_.batch = std::min(batches_, resume_batch(pos_.batch, resumed_global_batch_, global_batch_));
    pos_.step = pos_.epoch * batches_ + pos_.batch;
    log_ << "the checkpoint was written at a global batch of " << resumed_global_batch_ << ", this run's is "
         << global_batch_ << ": continuing at batch " << pos_.batch << " of epoch " << pos_.epoch + 1 << " (step "
         << pos_.step << ")" << std::endl;
  }
  std::ofstream metrics = open_metrics();
  open_tensorboard();

  result_.run_dir = run_dir_.string();
  result_.device = backend_->device().str();
  result_.best_accuracy = pos_.best_accuracy;
  prepare_step(loader.batch_size());
  run_start_ = Clock::now();
  for (; pos_.epoch < config_.epochs; ++pos_.epoch, pos_.batch = 0) {
    EpochTally tally;
    if (pos_.batch > 0) continue_tally(tally);
    tensorboard_window(tally);
    if (!train_epoch(loader, tally)) {
      result_.skipped_steps += tally.skipped;
      return stop_with_checkpoint(tally);
    }
    tally.loader = loader.stats();
    if (config_.dataset.skip_bad_images)  // rank 0 reports every rank's
      tally.loader.skipped = comm_->sum(*backend_, static_cast<int32_t>(tally.loader.skipped));
    tally.loader_images_per_second = loader.images_per_second();
    result_.skipped_steps += tally.skipped;
    end_epoch(tally, metrics);
  }
  comm_->finish();
  return result_so_far(/*interrupted=*/false);
}

// The first step's one-time work (cuDNN's plans, the kernels' loading, the step's CUDA
// graph), done before the clock starts as MLPerf's rules time a run: it is set-up, reported as
// such, and the figures compare like with like (the PyTorch peer warms up the same way).
void TrainingRun::prepare_step(int64_t batch_size) {
  if (pos_.epoch >= config_.epochs) return;
  const auto start = Clock::now();
  if (!step_.prepare(batch_size)) return;
  result_.setup_seconds = seconds_since(start);
  log_ << "step prepared (convolution plans, kernels, CUDA graph) in " << std::fixed << std::setprecision(2)
       << result_.setup_seconds << " s, before the training clock" << std::defaultfloat << std::endl;
}

void TrainingRun::log_start() const {
  log_ << "training " << model_.name() << " (" << model_.parameter_count() << " parameters) on "
       << backend_->describe() << ", "
       << (dtype_ == DType::bf16 ? "bf16 mixed precision"
           : config_.precision == Precision::tf32 && trains_in(Precision::tf32, backend_->device().kind)
               ? "tf32 (f32 tensors, TF32 tensor-core math)"
               : "fp32")
       << (model_.layout() == Layout::nhwc ? ", channels-last" : "")
       << ", " << train_data_->size() << " training images (" << train_data_->name() << "), batch "
       << config_.batch_size << std::endl;
  if (comm_->world_size() > 1) log_ << data_parallel_line(config_, *comm_) << std::endl;
}

// Every rank must stop at the same step, or the others would wait in a collective for it: the
// signal (each rank gets its own, at its own step) counts once the ranks agree at a reading
// point (`agree`, the same steps on every rank); --max-steps is the same everywhere.
bool TrainingRun::stop_requested(bool agree) {
  const bool signal = options_.stop_requested && options_.stop_requested->load();
  if (options_.max_steps && pos_.step >= options_.max_steps) return true;
  if (comm_->world_size() == 1) return signal;
  return agree && comm_->any(*backend_, signal);
}

// The rest of epoch pos_.epoch; false when a signal or --max-steps stopped it.
bool TrainingRun::train_epoch(DataLoader& loader, EpochTally& tally) {
  loader.start_epoch(pos_.epoch, pos_.batch);
  tally.start = Clock::now();
  bool stopped = false;
  Batch batch;
  // A data-bound run shows in the epoch's line as time waited here.
  auto next = [&] {
    const auto asked = Clock::now();
    const bool more = loader.next(batch);
    tally.data_wait_seconds += seconds_since(asked);
    return more;
  };
  while (!stopped && next()) {
    if (empty_batch(batch)) {
      ++tally.left_out_batches;
      ++pos_.batch;
      continue;
    }
    if (pos_.step + 1 == fault_step_) {
      log_ << "CONVOY_FAULT_INJECT: the device fails as step " << fault_step_ << " starts (a test hook)" << std::endl;
      backend_->inject_device_error();
    }
    tally.lr = scheduled_lr(config_.schedule, config_.optimizer.lr, pos_.step, batches_, total_steps_);
    const Tensor images = uploader_->upload(batch.images);  // (N, C, H, W) u8
    const Tensor labels = uploader_->upload(batch.labels);  // (N) i32
    PendingStep pending{TrainStepOutput{}, pos_.step, pos_.batch, false};
    pending.poisoned = has_step(options_.nonfinite_loss_steps, pos_.step);
    bool updated = true;
    if (config_.nan_skip_step) {
      updated = step_skipping_bad(pending, images, labels, tally.lr);
    } else if (has_step(options_.nonfinite_gradient_steps, pos_.step)) {
      pending.out = step_.forward(images, labels, pos_.step);
      step_.share(pending.out, /*wait=*/false);
      step_.backward();
      poison_gradients(pos_.step);
      step_.apply(tally.lr, &pending.out.grad_stats);
    } else {
      pending.out = step_.run(images, labels, pos_.step, tally.lr);
    }
    if (updated) {
      tally.pending.push_back(std::move(pending));
      ++tally.steps;
      tally.images += batch.images.dim(0) * comm_->world_size();  // the hits are the global batch's
    } else {
      ++tally.skipped;
      tally.skipped_images += batch.images.dim(0) * comm_->world_size();
    }
    ++pos_.step;
    ++pos_.batch;
    const bool reading = pos_.batch % config_.log_every == 0 || pos_.batch == batches_ || tally.pending.size() >= 64;
    stopped = stop_requested(reading);
    if (reading || stopped) {
      read_pending(tally);
      tally.loader_images_per_second = loader.images_per_second();
      show_progress(tally);
      tensorboard_steps(tally);
    }
  }
  read_pending(tally);
  progress_.end_epoch();
  step_.drop_recording();  // its activations' memory, for the evaluation
  backend_->synchronize();
  return !stopped;
}

// Whether to leave this batch out: every sample of it was unreadable and skipped (on_bad_image:
// skip). With several ranks every rank leaves it out if any rank has nothing in it, or that one
// would skip a step the others wait for in its collectives; the agreement is a read-back each
// step, paid only where a batch can be empty (skip mode), as the price of bad data.
bool TrainingRun::empty_batch(const Batch& batch) {
  const bool empty = batch.labels.dim(0) == 0;
  if (comm_->world_size() == 1 || !config_.dataset.skip_bad_images) return empty;
  return comm_->any(*backend_, empty);
}

// nan_policy: skip_step: the step's loss and gradients are read before its update (one device
// sync per step), and a step with a non-finite one changes no weight. The gradients are looked
// at in a pass of their own (the optimizer's, without the update): the fused update kernels
// cannot know in time whether another block saw a non-finite value. Returns whether it updated.
bool TrainingRun::step_skipping_bad(PendingStep& pending, const Tensor& images, const Tensor& labels, double lr) {
  pending.out = step_.forward(images, labels, pending.step);
  step_.share(pending.out, /*wait=*/true);  // every rank skips the same steps
  // The gradients are computed even for a non-finite loss: the step is rare, and one read-back
  // of the loss and the gradients together keeps it at one sync per step.
  step_.backward();
  poison_gradients(pending.step);
  step_.check_gradients(pending.out);
  const float loss = pending.poisoned ? NAN : pending.out.loss.to_floats()[0];
  const float bad_gradients = pending.out.grad_stats.to_floats()[0];  // averaged over ranks: the same everywhere
  if (std::isfinite(loss) && bad_gradients == 0) {
    step_.apply(lr);
    skipped_in_a_row_ = 0;
    return true;
  }
  if (++skipped_in_a_row_ >= kMaxSkippedInARow) diverged(BadStep{pending.step, pending.batch, loss, bad_gradients});
  return false;
}

// TrainOptions::nonfinite_gradient_steps: this step's first parameter gets an infinite
// gradient, a real one in device memory, for the checks to find.
void TrainingRun::poison_gradients(int64_t step) {
  if (!has_step(options_.nonfinite_gradient_steps, step)) return;
  backend_->ops().fill(model_.parameters().front().second->grad, INFINITY);
}

// The pending step results, read back; nan_policy: stop ends the run at a non-finite loss
// here, before any checkpoint is written (every checkpoint follows a read_pending()).
void TrainingRun::read_pending(EpochTally& tally) {
  if (const std::optional<BadStep> bad = tally.read_pending()) diverged(*bad);
}

void TrainingRun::diverged(const BadStep& bad) const {
  std::ostringstream out;
  out << "epoch " << pos_.epoch + 1 << ", step " << bad.step + 1 << " (batch " << bad.batch + 1 << " of "
      << batches_ << "): ";
  if (bad.gradients())
    out << "the gradients hold " << static_cast<int64_t>(bad.bad_gradients) << " non-finite value"
        << (bad.bad_gradients == 1 ? "" : "s") << " (inf or nan; the loss is a finite " << bad.loss << ")";
  else
    out << "the training loss is " << (std::isnan(bad.loss) ? "nan" : bad.loss > 0 ? "inf" : "-inf");
  if (bad.last_grad_norm > 0) {
    out << " (the last good step's gradient norm: ";
    // Its square sums in float: past ~1.8e19 it overflows though every element is finite.
    if (std::isfinite(bad.last_grad_norm)) out << bad.last_grad_norm << ")";
    else out << "over 1.8e19)";
  }
  if (config_.nan_skip_step)
    out << " for " << skipped_in_a_row_ << " steps in a row (nan_policy: skip_step): the weights no longer give a "
           "finite loss and gradients";
  out << "; training stopped. Likely causes: a learning rate too high (optimizer.lr " << config_.optimizer.lr
      << ", this step's " << scheduled_lr(config_.schedule, config_.optimizer.lr, bad.step, batches_, total_steps_)
      << "), or bad data (images or labels); nan_policy: skip_step skips such steps instead. ";
  out << kept_checkpoint();
  throw NumericError(out.str());
}

void TrainingRun::show_progress(const EpochTally& tally) {
  const double ips = static_cast<double>(tally.timed_images()) / std::max(1e-9, seconds_since(tally.start));
  const double remaining_images = static_cast<double>((total_steps_ - pos_.step) * global_batch_);
  progress_.update(pos_.epoch + 1, config_.epochs, pos_.batch, batches_,
                   tally.loss_sum / static_cast<double>(std::max<int64_t>(1, tally.steps)),
                   static_cast<double>(tally.correct) / static_cast<double>(std::max<int64_t>(1, tally.images)), ips,
                   tally.loader_images_per_second, remaining_images / std::max(1.0, ips));
}

// Evaluation, the checkpoints (best when it is), then the metrics row and the epoch's line:
// a crash between the two leaves no row for an epoch that --resume trains again.
void TrainingRun::end_epoch(const EpochTally& tally, std::ostream& metrics) {
  // Rank 0 evaluates the whole test set and writes; the others go on to the next epoch, whose
  // first collective waits for rank 0.
  if (!lead()) return;
  const double epoch_seconds = seconds_since(tally.start);
  const auto eval_start = Clock::now();
  const EvalResult eval = evaluate(model_, *backend_, *test_loader_, normalize_);
  eval_seconds_ += seconds_since(eval_start);
  if (!std::isfinite(eval.loss)) {
    std::ostringstream out;
    out << "epoch " << pos_.epoch + 1 << " (step " << pos_.step << "): the test loss is "
        << (std::isnan(eval.loss) ? "nan" : "inf")
        << " after the epoch's training: the weights are no longer finite; training stopped. Likely causes: a "
           "learning rate too high (optimizer.lr "
        << config_.optimizer.lr << "), or bad data. " << kept_checkpoint();
    throw NumericError(out.str());
  }
  result_.test_accuracy = eval.accuracy;
  const bool is_best = eval.accuracy > pos_.best_accuracy;
  if (is_best) pos_.best_accuracy = eval.accuracy;
  result_.best_accuracy = pos_.best_accuracy;

  Position done = pos_;
  done.epoch += 1;
  done.batch = 0;
  const RunCheckpointInfo info = checkpoint_info(done, eval.accuracy);
  if (is_best) save(best_path_, /*with_optimizer=*/false, info);
  save(last_path_, /*with_optimizer=*/true, info);
  report_epoch(tally, eval, epoch_seconds, is_best, metrics);
  tensorboard_epoch(tally, eval, epoch_seconds);
}

void TrainingRun::report_epoch(const EpochTally& tally, const EvalResult& eval, double epoch_seconds, bool is_best,
                               std::ostream& metrics) const {
  const double train_loss = tally.loss_sum / std::max<int64_t>(1, tally.steps);
  const double train_acc = static_cast<double>(tally.correct) / std::max<int64_t>(1, tally.images);
  const double images_per_second = static_cast<double>(tally.timed_images()) / epoch_seconds;
  const double loader_ips = tally.loader_images_per_second;
  metrics << pos_.epoch + 1 << ',' << pos_.step << ',' << tally.lr << ',' << train_loss << ',' << train_acc << ','
          << eval.loss << ',' << eval.accuracy << ',' << epoch_seconds << ',' << images_per_second << ','
          << loader_ips << std::endl;
  log_ << std::fixed << std::setprecision(2) << "epoch " << pos_.epoch + 1 << "/" << config_.epochs
       << ": train loss " << std::setprecision(4) << train_loss << ", test loss " << eval.loss
       << std::setprecision(2) << ", test accuracy " << eval.accuracy * 100 << "% ("
       << std::setprecision(1) << epoch_seconds << " s, "
       << std::setprecision(0) << images_per_second << " img/s, loader " << loader_ips << " img/s, "
       << std::setprecision(1) << tally.data_wait_seconds << " s waiting for data)"
       << (is_best ? " *best" : "") << std::defaultfloat;
  if (tally.skipped)
    log_ << ", skipped " << tally.skipped << " step" << (tally.skipped == 1 ? "" : "s")
         << " with a non-finite loss or gradients (nan_policy: skip_step)";
  log_ << std::endl;
  if (tally.loader.skipped || eval.skipped) {
    log_ << "skipped unreadable images (on_bad_image: skip): " << tally.loader.skipped << " in training, "
         << eval.skipped << " in evaluation";
    if (tally.left_out_batches)
      log_ << "; " << tally.left_out_batches << " training batch" << (tally.left_out_batches == 1 ? "" : "es")
           << " left out" << (comm_->world_size() > 1 ? " on every rank (a rank had no readable image in it)" : " (no readable image in it)");
    log_ << std::endl;
  }
}


}  // namespace training

TrainResult train(const RunConfig& config, const TrainOptions& options, std::ostream& log) {
  const RunConfig rank_config = config_for_rank(config, options.world);
  if (training::rank_of(options) == 0) return training::TrainingRun(rank_config, options, log).run();
  NullStream quiet;  // one log for the job: rank 0's
  return training::TrainingRun(rank_config, options, quiet).run();
}

}  // namespace convoy
