// A training run's state on disk: resuming from last.safetensors, the checkpoints it writes
// and the metrics file (the epoch loop is in trainer.cpp).
#include "engine/train/training_run.h"

#include "engine/core/file_io.h"

namespace convoy::training {

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
  if (pos_.batch > 0) resumed_epoch_ = ckpt.info.epoch_so_far;
  log_ << "resuming " << source << " at epoch " << pos_.epoch + 1 << ", step " << pos_.step << std::endl;
}

// metrics.csv: a resumed run appends to its rows, a new one starts the file over. Rows are
// written after the epoch's checkpoint; a resumed run still drops any row of an epoch its
// checkpoint does not hold (from a run that stopped between the two), so no epoch appears twice.
std::ofstream TrainingRun::open_metrics() const {
  if (!lead()) return std::ofstream();  // not open: the rows it is given go nowhere
  const fs::path path = run_dir_ / "metrics.csv";
  // Appended to row by row, so not an OutputFile; but never a device, FIFO or directory. The
  // checkpoints' targets too, now rather than after an epoch's training.
  check_output_target(path, "the metrics file");
  for (const fs::path& checkpoint : {last_path_, best_path_}) check_output_target(checkpoint, "the checkpoint");
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

std::string TrainingRun::kept_checkpoint() const {
  return fs::exists(last_path_) ? "The last good checkpoint is kept: " + last_path_.string()
                                : std::string("No checkpoint was written (no epoch finished)");
}

// save_run_checkpoint, with the run's position in the message when the weights are not finite.
void TrainingRun::save(const fs::path& path, bool with_optimizer, const RunCheckpointInfo& info) {
  try {
    save_run_checkpoint(path, model_, with_optimizer ? step_.optimizer().state() : std::vector<NamedTensor>{}, info);
  } catch (const NumericError& e) {
    throw NumericError("epoch " + std::to_string(pos_.epoch + 1) + ", step " + std::to_string(pos_.step) +
                       ": training stopped: " + e.what() + ". " + kept_checkpoint());
  }
}

// An epoch resumed in its middle: its training figures before the stop, from the checkpoint,
// so that its metrics row covers the whole epoch as an uninterrupted run's does.
void TrainingRun::continue_tally(EpochTally& tally) {
  if (!lead()) return;  // rank 0 alone writes the row
  if (!resumed_epoch_) {
    log_ << "epoch " << pos_.epoch + 1 << ": its train loss and accuracy (metrics.csv) cover the batches after the "
            "resume only: the checkpoint has no figures of the " << pos_.batch << " before it" << std::endl;
    return;
  }
  tally.loss_sum = resumed_epoch_->loss_sum;
  tally.correct = resumed_epoch_->correct;
  tally.steps = resumed_epoch_->steps;
  tally.images = tally.resumed_images = resumed_epoch_->images;
  resumed_epoch_.reset();
}

// A mid-epoch checkpoint that --resume continues from exactly, the epoch's figures included.
TrainResult TrainingRun::stop_with_checkpoint(const EpochTally& tally) {
  comm_->finish();
  if (!lead()) return result_so_far(/*interrupted=*/true);
  RunCheckpointInfo info = checkpoint_info(pos_, result_.test_accuracy);
  if (pos_.batch > 0) info.epoch_so_far = {tally.loss_sum, tally.correct, tally.steps, tally.images};
  save(last_path_, /*with_optimizer=*/true, info);
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

}  // namespace convoy::training
