#include "engine/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/dataset_checks.h"
#include "datasets/loader.h"
#include "engine/config/yaml_map.h"  // invalid_utf8_at
#include "engine/core/error.h"
#include "engine/graph/model.h"
#include "engine/optim/optimizer.h"
#include "engine/train/data_parallel.h"
#include "engine/train/evaluate.h"
#include "engine/train/progress.h"
#include "engine/train/run_checkpoint.h"
#include "engine/train/run_directory.h"
#include "engine/train/run_setup.h"
#include "engine/train/train_step.h"

namespace convoy {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// nan_policy: skip_step stops the run after this many skipped steps in a row: by then the
// weights, not a batch, are what gives the non-finite loss.
constexpr int64_t kMaxSkippedInARow = 100;

struct Position {
  int64_t epoch = 0;  // the epoch in progress (0-based)
  int64_t batch = 0;  // batches of it already done
  int64_t step = 0;   // optimizer steps in total
  double best_accuracy = 0;
};

// A step's results, not read back yet, and where in the run it was.
struct PendingStep {
  TrainStepOutput out;
  int64_t step = 0;   // the run's step index (0-based)
  int64_t batch = 0;  // the batch's index in its epoch (0-based)
  bool poisoned = false;  // TrainOptions::nonfinite_loss_steps: read its loss as NaN
};

// A step whose loss was not finite.
struct BadStep {
  int64_t step = 0, batch = 0;
  float loss = 0;
};

// One epoch's running figures, from the step results read back so far.
struct EpochTally {
  Clock::time_point start;
  double lr = 0;  // the last step's
  double loss_sum = 0;
  int64_t correct = 0;
  int64_t steps = 0;   // steps that updated the weights
  int64_t images = 0;  // their images
  int64_t skipped = 0;  // steps with a non-finite loss whose update was skipped (nan_policy: skip_step)
  int64_t skipped_images = 0;
  double loader_images_per_second = 0;  // what the loader alone could deliver (so far, then the epoch's)
  DataLoader::Stats loader;              // the epoch's, once it is done
  // Per-step results stay on the device until they are printed: no sync every step.
  std::vector<PendingStep> pending;

  // Adds the pending results up; the first step whose loss is not finite stops the reading
  // and is returned (nan_policy: stop checks the loss here, within 64 steps of the step).
  std::optional<BadStep> read_pending() {
    std::optional<BadStep> bad;
    for (const PendingStep& p : pending) {
      const float loss = p.poisoned ? NAN : p.out.loss.to_floats()[0];
      if (!std::isfinite(loss)) {
        bad = BadStep{p.step, p.batch, loss};
        break;
      }
      loss_sum += loss;
      correct += static_cast<int64_t>(p.out.hits.to_floats()[0]);
    }
    pending.clear();
    return bad;
  }
};

int rank_of(const TrainOptions& options) {
  return options.communicator ? options.communicator->rank() : options.world.rank;
}

TrainRecipe recipe_of(const RunConfig& config, const NormalizeAugment& normalize) {
  TrainRecipe recipe{config.optimizer, normalize, config.label_smoothing, config.seed, config.sync_batchnorm};
  recipe.augment.crop_padding = config.dataset.crop_padding;
  recipe.augment.horizontal_flip = config.dataset.horizontal_flip;
  return recipe;
}

// A run from setup to its last checkpoint: train() in pieces that share its state.
class TrainingRun {
 public:
  // Setup: backend, data, model, optimizer. Nothing is written yet.
  TrainingRun(const RunConfig& config, const TrainOptions& options, std::ostream& log)
      : config_(config), options_(options), log_(log),
        run_dir_(fs::path(config.output_dir) / config.name),
        last_path_(run_dir_ / "last.safetensors"), best_path_(run_dir_ / "best.safetensors"),
        lock_(rank_of(options) == 0 ? std::make_unique<RunDirLock>(run_dir_) : nullptr),
        backend_(open_backend(config, log)),
        own_comm_(options.communicator ? nullptr
                                       : make_communicator(*backend_, options.world, communicator_options(config))),
        comm_(options.communicator ? options.communicator : own_comm_.get()),
        train_data_(load_split(config, config.dataset.train_split, config.dataset.train_limit)),
        test_data_(load_split(config, config.dataset.test_split, config.dataset.test_limit)),
        model_(build_model(config, *train_data_, *backend_, log)), dtype_(model_.compute_dtype()),
        preprocess_(preprocess_of(config, model_)),
        normalize_(make_normalize(config.dataset.mean, config.dataset.std)),
        step_(*backend_, model_, recipe_of(config, normalize_), comm_, config.bucket_mb << 20),
        uploader_(backend_->make_batch_uploader()),
        progress_(log, config.log_every) {
    check_same_classes(*train_data_, *test_data_);
    // The checkpoints' metadata is JSON: a class name that is not UTF-8 (a folder name in
    // another encoding) would fail the first save, after an epoch of training.
    for (const std::string& name : train_data_->class_names())
      if (invalid_utf8_at(name) != std::string::npos)
        throw InputError(train_data_->name() + ": class name '" + name + "' is not UTF-8 text (rename it)");
  }

  TrainResult run();

 private:
  TrainResult run_epochs();
  void resume();
  void read_checkpoint();
  void log_start() const;
  std::ofstream open_metrics() const;
  bool stop_requested(bool agree);
  bool lead() const { return comm_->rank() == 0; }  // logs, evaluates, writes
  bool train_epoch(DataLoader& loader, EpochTally& tally);
  void read_pending(EpochTally& tally);
  [[noreturn]] void diverged(const BadStep& bad) const;
  std::string kept_checkpoint() const;
  void save(const fs::path& path, bool with_optimizer, const RunCheckpointInfo& info);
  void show_progress(const EpochTally& tally);
  void end_epoch(const EpochTally& tally, std::ostream& metrics);
  void report_epoch(const EpochTally& tally, const EvalResult& eval, double epoch_seconds, bool is_best,
                    std::ostream& metrics) const;
  TrainResult stop_with_checkpoint();
  TrainResult result_so_far(bool interrupted);
  RunCheckpointInfo checkpoint_info(const Position& pos, double test_accuracy) const;

  const RunConfig& config_;
  const TrainOptions& options_;
  std::ostream& log_;
  const fs::path run_dir_, last_path_, best_path_;
  std::unique_ptr<RunDirLock> lock_;  // rank 0's, taken before the data is read: a second writer fails at once
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Communicator> own_comm_;  // the other ranks; local for a world of one
  Communicator* comm_;                      // own_comm_, or TrainOptions::communicator
  std::unique_ptr<Dataset> train_data_, test_data_;
  Model model_;
  DType dtype_;  // f32, or bf16 for mixed precision where the backend runs the model in it
  Preprocess preprocess_;
  NormalizeAugment normalize_;  // evaluation's; the training step adds the augmentation
  TrainStep step_;
  std::unique_ptr<BatchUploader> uploader_;  // the training batches' way to the device
  Progress progress_;
  Position pos_;
  TrainResult result_;
  int64_t batches_ = 0;  // per epoch
  int64_t global_batch_ = 0;  // samples per step over all ranks
  int64_t resumed_global_batch_ = 0;  // the checkpoint's, while its position is not converted yet
  int64_t total_steps_ = 0;
  int64_t skipped_in_a_row_ = 0;  // nan_policy: skip_step
  Clock::time_point run_start_;
  double eval_seconds_ = 0;  // left out of the training time
  DataLoader* test_loader_ = nullptr;  // run()'s, while it runs
};

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

  result_.run_dir = run_dir_.string();
  result_.device = backend_->device().str();
  result_.best_accuracy = pos_.best_accuracy;
  run_start_ = Clock::now();
  for (; pos_.epoch < config_.epochs; ++pos_.epoch, pos_.batch = 0) {
    EpochTally tally;
    if (!train_epoch(loader, tally)) {
      result_.skipped_steps += tally.skipped;
      return stop_with_checkpoint();
    }
    tally.loader = loader.stats();
    tally.loader_images_per_second = loader.images_per_second();
    result_.skipped_steps += tally.skipped;
    end_epoch(tally, metrics);
  }
  comm_->finish();
  return result_so_far(/*interrupted=*/false);
}

void TrainingRun::resume() {
  global_batch_ = config_.batch_size * comm_->world_size();
  if (lead()) read_checkpoint();
  // Rank 0 alone reads the checkpoint (the other ranks need no access to the run directory: a
  // pod of another node, a host of an mpirun job) and hands its position and state on.
  if (comm_->world_size() > 1) {
    share_from_rank0(*comm_, *backend_, {&pos_.epoch, &pos_.batch, &pos_.step, &resumed_global_batch_});
    step_.optimizer().set_steps(pos_.step);
  }
  step_.sync_from_rank0();
}

// Continues from last.safetensors when --resume asks for it and it is there.
void TrainingRun::read_checkpoint() {
  if (!options_.resume) return;
  std::error_code ec;  // a run directory we may not search is reported where it is created
  if (!fs::exists(last_path_, ec)) {
    log_ << "no checkpoint at " << last_path_.string() << "; starting a new run" << std::endl;
    return;
  }
  const RunCheckpoint ckpt = read_run_checkpoint(last_path_, CheckpointUse::resume);
  const std::string source = last_path_.string();
  if (ckpt.info.model_yaml != model_.yaml())
    throw InputError(source + ": the checkpoint was trained with another model than " + config_.model_path);
  model_.load_state(ckpt.tensors, source);
  pos_.epoch = ckpt.info.epoch;
  pos_.batch = ckpt.info.batch_in_epoch;
  pos_.step = ckpt.info.step;
  pos_.best_accuracy = ckpt.info.best_accuracy;
  result_.test_accuracy = ckpt.info.test_accuracy;  // what a finished run reports
  step_.optimizer().load_state(ckpt.tensors, pos_.step, source);
  model_.refresh_compute_weights(*backend_);
  if (ckpt.info.global_batch != global_batch_) resumed_global_batch_ = ckpt.info.global_batch;
  log_ << "resuming " << source << " at epoch " << pos_.epoch + 1 << ", step " << pos_.step << std::endl;
}

void TrainingRun::log_start() const {
  log_ << "training " << model_.name() << " (" << model_.parameter_count() << " parameters) on "
       << backend_->describe() << ", " << (dtype_ == DType::bf16 ? "bf16 mixed precision" : "fp32")
       << (model_.layout() == Layout::nhwc ? ", channels-last" : "")
       << ", " << train_data_->size() << " training images (" << train_data_->name() << "), batch "
       << config_.batch_size << std::endl;
  if (comm_->world_size() > 1) log_ << data_parallel_line(config_, *comm_) << std::endl;
}

// metrics.csv: a resumed run appends to its rows, a new one starts the file over. Rows are
// written after the epoch's checkpoint; a resumed run still drops any row of an epoch its
// checkpoint does not hold (from a run that stopped between the two), so no epoch appears twice.
std::ofstream TrainingRun::open_metrics() const {
  if (!lead()) return std::ofstream();  // not open: the rows it is given go nowhere
  const fs::path path = run_dir_ / "metrics.csv";
  std::error_code ec;
  bool fresh = !fs::exists(path, ec) || pos_.step == 0;
  if (!fresh) {
    drop_metrics_rows_after(path, pos_.epoch);
    fresh = fs::file_size(path, ec) == 0;  // its header was cut short too
  }
  std::ofstream metrics(path, fresh ? std::ios::trunc : std::ios::app);
  if (!metrics) throw InputError(path.string() + ": cannot write the metrics file");
  if (fresh)
    metrics << "epoch,step,lr,train_loss,train_accuracy,test_loss,test_accuracy,epoch_seconds,images_per_second,"
               "loader_images_per_second\n";
  return metrics;
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
  while (!stopped && loader.next(batch)) {
    if (batch.labels.dim(0) == 0) {  // every sample of it unreadable and skipped
      ++pos_.batch;
      continue;
    }
    tally.lr = scheduled_lr(config_.schedule, config_.optimizer.lr, pos_.step, batches_, total_steps_);
    const Tensor images = uploader_->upload(batch.images);  // (N, C, H, W) u8
    const Tensor labels = uploader_->upload(batch.labels);  // (N) i32
    PendingStep pending{TrainStepOutput{}, pos_.step, pos_.batch, false};
    pending.poisoned = std::find(options_.nonfinite_loss_steps.begin(), options_.nonfinite_loss_steps.end(),
                                 pos_.step) != options_.nonfinite_loss_steps.end();
    bool updated = true;
    if (config_.nan_skip_step) {
      // The loss must be known before the update: one read-back (a device sync) per step.
      pending.out = step_.forward(images, labels, pos_.step);
      step_.share(pending.out, /*wait=*/true);  // every rank skips the same steps
      const float loss = pending.poisoned ? NAN : pending.out.loss.to_floats()[0];
      updated = std::isfinite(loss);
      if (updated) {
        step_.update(tally.lr);
        skipped_in_a_row_ = 0;
      } else if (++skipped_in_a_row_ >= kMaxSkippedInARow) {
        diverged(BadStep{pos_.step, pos_.batch, loss});
      }
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
    }
  }
  read_pending(tally);
  progress_.end_epoch();
  backend_->synchronize();
  return !stopped;
}

// The pending step results, read back; nan_policy: stop ends the run at a non-finite loss
// here, before any checkpoint is written (every checkpoint follows a read_pending()).
void TrainingRun::read_pending(EpochTally& tally) {
  if (const std::optional<BadStep> bad = tally.read_pending()) diverged(*bad);
}

void TrainingRun::diverged(const BadStep& bad) const {
  std::ostringstream out;
  out << "epoch " << pos_.epoch + 1 << ", step " << bad.step + 1 << " (batch " << bad.batch + 1 << " of "
      << batches_ << "): the training loss is " << (std::isnan(bad.loss) ? "nan" : bad.loss > 0 ? "inf" : "-inf");
  if (config_.nan_skip_step)
    out << " for " << skipped_in_a_row_ << " steps in a row (nan_policy: skip_step): the weights no longer give a "
           "finite loss";
  out << "; training stopped. Likely causes: a learning rate too high (optimizer.lr " << config_.optimizer.lr
      << ", this step's " << scheduled_lr(config_.schedule, config_.optimizer.lr, bad.step, batches_, total_steps_)
      << "), or bad data (images or labels); nan_policy: skip_step skips such steps instead. ";
  out << kept_checkpoint();
  throw NumericError(out.str());
}

std::string TrainingRun::kept_checkpoint() const {
  return fs::exists(last_path_) ? "The last good checkpoint is kept: " + last_path_.string()
                                : std::string("No checkpoint was written (no epoch finished)");
}

// save_run_checkpoint, with the run's position in the message when the weights are not finite.
void TrainingRun::save(const fs::path& path, bool with_optimizer, const RunCheckpointInfo& info) {
  try {
    save_run_checkpoint(path, model_, with_optimizer ? &step_.optimizer() : nullptr, info);
  } catch (const NumericError& e) {
    throw NumericError("epoch " + std::to_string(pos_.epoch + 1) + ", step " + std::to_string(pos_.step) +
                       ": training stopped: " + e.what() + ". " + kept_checkpoint());
  }
}

void TrainingRun::show_progress(const EpochTally& tally) {
  const double ips = static_cast<double>(tally.images + tally.skipped_images) / std::max(1e-9, seconds_since(tally.start));
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
}

void TrainingRun::report_epoch(const EpochTally& tally, const EvalResult& eval, double epoch_seconds, bool is_best,
                               std::ostream& metrics) const {
  const double train_loss = tally.loss_sum / std::max<int64_t>(1, tally.steps);
  const double train_acc = static_cast<double>(tally.correct) / std::max<int64_t>(1, tally.images);
  const double images_per_second = static_cast<double>(tally.images + tally.skipped_images) / epoch_seconds;
  const double loader_ips = tally.loader_images_per_second;
  metrics << pos_.epoch + 1 << ',' << pos_.step << ',' << tally.lr << ',' << train_loss << ',' << train_acc << ','
          << eval.loss << ',' << eval.accuracy << ',' << epoch_seconds << ',' << images_per_second << ','
          << loader_ips << std::endl;
  log_ << std::fixed << std::setprecision(2) << "epoch " << pos_.epoch + 1 << "/" << config_.epochs
       << ": train loss " << std::setprecision(4) << train_loss << ", test loss " << eval.loss
       << std::setprecision(2) << ", test accuracy " << eval.accuracy * 100 << "% ("
       << std::setprecision(1) << epoch_seconds << " s, "
       << std::setprecision(0) << images_per_second << " img/s, loader " << loader_ips << " img/s)"
       << (is_best ? " *best" : "") << std::defaultfloat;
  if (tally.skipped)
    log_ << ", skipped " << tally.skipped << " step" << (tally.skipped == 1 ? "" : "s")
         << " with a non-finite loss (nan_policy: skip_step)";
  log_ << std::endl;
  if (tally.loader.skipped || eval.skipped)
    log_ << "skipped unreadable images (on_bad_image: skip): " << tally.loader.skipped << " in training, "
         << eval.skipped << " in evaluation" << std::endl;
}

// A mid-epoch checkpoint that --resume continues from exactly.
TrainResult TrainingRun::stop_with_checkpoint() {
  comm_->finish();
  if (!lead()) return result_so_far(/*interrupted=*/true);
  save(last_path_, /*with_optimizer=*/true, checkpoint_info(pos_, result_.test_accuracy));
  log_ << "stopped at epoch " << pos_.epoch + 1 << ", step " << pos_.step << "; checkpoint "
       << last_path_.string() << " (continue with --resume)" << std::endl;
  return result_so_far(/*interrupted=*/true);
}

TrainResult TrainingRun::result_so_far(bool interrupted) {
  result_.interrupted = interrupted;
  result_.steps = pos_.step;
  result_.epochs_done = pos_.epoch;
  result_.train_seconds = seconds_since(run_start_) - eval_seconds_;
  return result_;
}

RunCheckpointInfo TrainingRun::checkpoint_info(const Position& pos, double test_accuracy) const {
  RunCheckpointInfo info;
  info.model_yaml = model_.yaml();
  info.config_yaml = config_.resolved_yaml;
  info.class_names = train_data_->class_names();
  info.preprocess = preprocess_;
  info.horizontal_flip = config_.dataset.horizontal_flip;
  info.crop_padding = config_.dataset.crop_padding;
  info.input_shape = model_.input_shape();
  info.mean = config_.dataset.mean;
  info.std = config_.dataset.std;
  info.epoch = pos.epoch;
  info.batch_in_epoch = pos.batch;
  info.step = pos.step;
  info.global_batch = global_batch_;
  info.seed = config_.seed;
  info.optimizer = config_.optimizer.type;
  info.precision = config_.precision;
  info.test_accuracy = test_accuracy;
  info.best_accuracy = pos.best_accuracy;
  return info;
}

}  // namespace

TrainResult train(const RunConfig& config, const TrainOptions& options, std::ostream& log) {
  const RunConfig rank_config = config_for_rank(config, options.world);
  if (rank_of(options) == 0) return TrainingRun(rank_config, options, log).run();
  NullStream quiet;  // one log for the job: rank 0's
  return TrainingRun(rank_config, options, quiet).run();
}

}  // namespace convoy
