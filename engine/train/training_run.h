#pragma once
// The pieces train() is made of (engine/train only): a run from setup to its last checkpoint,
// its epoch loop in trainer.cpp, its checkpoints and metrics file in training_run_state.cpp.
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
#include "engine/bundle/run_checkpoint.h"
#include "engine/config/yaml_map.h"  // invalid_utf8_at
#include "engine/core/error.h"
#include "engine/graph/model.h"
#include "engine/optim/optimizer.h"
#include "engine/train/data_parallel.h"
#include "engine/bundle/evaluate.h"
#include "engine/train/progress.h"
#include "engine/train/run_directory.h"
#include "engine/train/run_setup.h"
#include "engine/train/tensorboard.h"
#include "engine/train/train_step.h"
#include "engine/train/trainer.h"

namespace convoy::training {

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

// A step whose loss or gradients were not finite.
struct BadStep {
  int64_t step = 0, batch = 0;
  float loss = 0;
  float bad_gradients = 0;  // non-finite gradient elements (the check runs where the loss is finite)
  double last_grad_norm = 0;  // the global gradient norm of the last good step read back (0: none)
  bool gradients() const { return std::isfinite(loss) && bad_gradients > 0; }
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
  int64_t resumed_images = 0;  // of `images`, those trained before a resume: in the accuracy, not the throughput
  int64_t left_out_batches = 0;  // batches with no readable image (on any rank), not trained on
  double loader_images_per_second = 0;  // what the loader alone could deliver (so far, then the epoch's)
  double data_wait_seconds = 0;         // the training thread's time waiting for the loader's next batch
  DataLoader::Stats loader;              // the epoch's, once it is done
  // Per-step results stay on the device until they are printed: no sync every step.
  std::vector<PendingStep> pending;

  double grad_norm = 0;  // the last step's global gradient norm read back (finite gradients)

  // Images trained or skipped since `start`: what the epoch's throughput divides.
  int64_t timed_images() const { return images - resumed_images + skipped_images; }

  // Adds the pending results up; the first step whose loss or gradients are not finite stops
  // the reading and is returned (nan_policy: stop checks them here, within 64 steps of the
  // step, in the one device sync that reads the losses).
  std::optional<BadStep> read_pending() {
    std::optional<BadStep> bad;
    for (const PendingStep& p : pending) {
      const float loss = p.poisoned ? NAN : p.out.loss.to_floats()[0];
      const std::vector<float> grads = p.out.grad_stats.to_floats();  // (2): non-finite, sum of squares
      if (!std::isfinite(loss) || grads[0] > 0) {
        bad = BadStep{p.step, p.batch, loss, grads[0], grad_norm};
        break;
      }
      grad_norm = std::sqrt(static_cast<double>(grads[1]));
      loss_sum += loss;
      correct += static_cast<int64_t>(p.out.hits.to_floats()[0]);
    }
    pending.clear();
    return bad;
  }
};

inline int rank_of(const TrainOptions& options) {
  return options.communicator ? options.communicator->rank() : options.world.rank;
}

inline TrainRecipe recipe_of(const RunConfig& config, const NormalizeAugment& normalize) {
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
        backend_(open_backend(config, options.engine, log)),
        own_comm_(options.communicator ? nullptr
                                       : make_communicator(*backend_, options.world, communicator_options(config))),
        comm_(options.communicator ? options.communicator : own_comm_.get()),
        train_data_(load_split(config, options.engine, config.dataset.train_split, config.dataset.train_limit)),
        test_data_(load_split(config, options.engine, test_split_of(config, log), config.dataset.test_limit)),
        model_(build_model(config, options.engine, *train_data_, *backend_, log)), dtype_(model_.compute_dtype()),
        preprocess_(preprocess_of(config, model_)),
        normalize_(make_normalize(config.dataset.mean, config.dataset.std)),
        step_(*backend_, model_, recipe_of(config, normalize_), comm_, config.bucket_mb << 20),
        uploader_(backend_->make_batch_uploader()),
        progress_(log, config.log_every) {
    check_same_classes(*train_data_, *test_data_);
    if (!options.engine.cuda_graphs) step_.set_recording(false);
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
  void prepare_step(int64_t batch_size);
  void log_start() const;
  std::ofstream open_metrics() const;
  bool stop_requested(bool agree);
  bool lead() const { return comm_->rank() == 0; }  // logs, evaluates, writes
  bool train_epoch(DataLoader& loader, EpochTally& tally);
  bool step_skipping_bad(PendingStep& pending, const Tensor& images, const Tensor& labels, double lr);
  bool empty_batch(const Batch& batch);
  void poison_gradients(int64_t step);
  void read_pending(EpochTally& tally);
  [[noreturn]] void diverged(const BadStep& bad) const;
  std::string kept_checkpoint() const;
  void save(const fs::path& path, bool with_optimizer, const RunCheckpointInfo& info);
  void show_progress(const EpochTally& tally);
  void end_epoch(const EpochTally& tally, std::ostream& metrics);
  void report_epoch(const EpochTally& tally, const EvalResult& eval, double epoch_seconds, bool is_best,
                    std::ostream& metrics) const;
  // output.tensorboard (training_run_tensorboard.cpp): the run's config, the scalars of each
  // progress point (the steps since the last one) and of each epoch.
  void open_tensorboard();
  void tensorboard_window(const EpochTally& tally);  // the next progress point's steps start here
  void tensorboard_steps(const EpochTally& tally);
  void tensorboard_epoch(const EpochTally& tally, const EvalResult& eval, double epoch_seconds);
  template <typename Write>
  void to_tensorboard(Write&& write);
  void continue_tally(EpochTally& tally);
  TrainResult stop_with_checkpoint(const EpochTally& tally);
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
  std::optional<RunCheckpointInfo::EpochSoFar> resumed_epoch_;  // the checkpoint's, until the epoch takes it
  int64_t total_steps_ = 0;
  int64_t skipped_in_a_row_ = 0;  // nan_policy: skip_step
  int64_t fault_step_ = options_.engine.fault_inject_step;  // the device fails as this step (1-based) starts; 0: never
  Clock::time_point run_start_;
  double eval_seconds_ = 0;  // left out of the training time
  DataLoader* test_loader_ = nullptr;  // run()'s, while it runs
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // rank 0's, with output.tensorboard
  struct Logged {  // the epoch's tally at the last TensorBoard point
    int64_t steps = 0, images = 0, correct = 0;
    double loss_sum = 0;
    Clock::time_point at;
  } logged_;
};

}  // namespace convoy::training
