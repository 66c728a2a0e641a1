// TrainingRun's TensorBoard events (output.tensorboard): rank 0 writes them beside metrics.csv.
// A failed write (a full disk, say) warns once and ends the events, not the training: the
// checkpoints and metrics.csv are the run's record.
#include "engine/train/training_run.h"

namespace convoy::training {

template <typename Write>
void TrainingRun::to_tensorboard(Write&& write) {
  if (!tensorboard_) return;
  try {
    write(*tensorboard_);
  } catch (const InputError& e) {
    log_ << "warning: " << e.what() << "; no more TensorBoard events for this run" << std::endl;
    tensorboard_.reset();
  }
}

void TrainingRun::open_tensorboard() {
  if (!config_.tensorboard || !lead()) return;
  tensorboard_ = std::make_unique<TensorBoardWriter>(run_dir_, pos_.step);
  to_tensorboard([&](TensorBoardWriter& tb) {
    // Indented four spaces: Markdown's code block, so the YAML keeps its lines.
    std::string text;
    std::istringstream lines(config_.resolved_yaml);
    for (std::string line; std::getline(lines, line);) text += "    " + line + "\n";
    tb.text("config", pos_.step, text);
    tb.flush();
  });
}

void TrainingRun::tensorboard_window(const EpochTally& tally) {
  logged_ = Logged{tally.steps, tally.images, tally.correct, tally.loss_sum, Clock::now()};
}

void TrainingRun::tensorboard_steps(const EpochTally& tally) {
  if (!tensorboard_) return;
  const int64_t steps = tally.steps - logged_.steps;
  if (steps <= 0) return;
  const int64_t images = tally.images - logged_.images;
  const double seconds = std::chrono::duration<double>(Clock::now() - logged_.at).count();
  to_tensorboard([&](TensorBoardWriter& tb) {
    tb.scalar("train/loss", pos_.step, (tally.loss_sum - logged_.loss_sum) / static_cast<double>(steps));
    tb.scalar("train/accuracy", pos_.step,
              static_cast<double>(tally.correct - logged_.correct) / static_cast<double>(std::max<int64_t>(1, images)));
    tb.scalar("train/learning_rate", pos_.step, tally.lr);
    if (seconds > 0) tb.scalar("train/images_per_second", pos_.step, static_cast<double>(images) / seconds);
    tb.flush();
  });
  tensorboard_window(tally);
}

void TrainingRun::tensorboard_epoch(const EpochTally& tally, const EvalResult& eval, double epoch_seconds) {
  to_tensorboard([&](TensorBoardWriter& tb) {
    tb.scalar("epoch/train_loss", pos_.step, tally.loss_sum / static_cast<double>(std::max<int64_t>(1, tally.steps)));
    tb.scalar("epoch/train_accuracy", pos_.step,
              static_cast<double>(tally.correct) / static_cast<double>(std::max<int64_t>(1, tally.images)));
    tb.scalar("epoch/test_loss", pos_.step, eval.loss);
    tb.scalar("epoch/test_accuracy", pos_.step, eval.accuracy);
    tb.scalar("epoch/images_per_second", pos_.step,
              static_cast<double>(tally.images + tally.skipped_images) / std::max(1e-9, epoch_seconds));
    tb.scalar("epoch/seconds", pos_.step, epoch_seconds);
    tb.scalar("epoch/epoch", pos_.step, static_cast<double>(pos_.epoch + 1));
    tb.flush();
  });
}

}  // namespace convoy::training
