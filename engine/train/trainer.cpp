#include "engine/train/trainer.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <iostream>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/dataset_checks.h"
#include "datasets/loader.h"
#include "engine/config/yaml_map.h"
#include "engine/core/error.h"
#include "engine/core/file_io.h"
#include "engine/graph/model.h"
#include "engine/optim/optimizer.h"
#include "engine/train/evaluate.h"
#include "engine/train/run_checkpoint.h"
#include "engine/train/train_step.h"

namespace convoy {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(std::max(0.0, seconds));
  std::ostringstream out;
  out << s / 60 << ':' << std::setw(2) << std::setfill('0') << s % 60;
  return out.str();
}

// Live progress: a redrawn bar on a terminal, plain periodic lines otherwise.
class Progress {
 public:
  Progress(std::ostream& log, int64_t log_every)
      : log_(log), tty_(&log == &std::cout && isatty(STDOUT_FILENO)), log_every_(log_every) {}

  void update(int64_t epoch, int64_t epochs, int64_t batch, int64_t batches, double loss,
              double accuracy, double images_per_second, double loader_images_per_second, double eta_seconds) {
    const bool last = batch == batches;
    if (tty_) {
      if (!last && seconds_since(last_draw_) < 0.2) return;
      last_draw_ = Clock::now();
      const int width = 24;
      const int filled = static_cast<int>(width * batch / std::max<int64_t>(1, batches));
      log_ << "\r\033[Kepoch " << epoch << "/" << epochs << " [" << std::string(filled, '=')
           << (filled < width ? ">" : "") << std::string(std::max(0, width - filled - 1), ' ')
           << "] " << batch << "/" << batches << line(loss, accuracy, images_per_second, loader_images_per_second, eta_seconds)
           << std::flush;
    } else if (batch % log_every_ == 0 || last) {
      log_ << "epoch " << epoch << "/" << epochs << " step " << batch << "/" << batches
           << line(loss, accuracy, images_per_second, loader_images_per_second, eta_seconds) << std::endl;
    }
  }
  void end_epoch() {
    if (tty_) log_ << "\n";
  }

 private:
  // The loader's own rate beside the training rate: when the two are close, the run is data-bound.
  static std::string line(double loss, double accuracy, double ips, double loader_ips, double eta) {
    std::ostringstream out;
    out << std::fixed << std::setprecision(4) << "  loss " << loss << std::setprecision(2)
        << "  acc " << accuracy * 100 << "%  " << std::setprecision(0) << ips << " img/s (loader "
        << loader_ips << ")  ETA " << format_duration(eta);
    return out.str();
  }
  std::ostream& log_;
  bool tty_;
  int64_t log_every_;
  Clock::time_point last_draw_{};
};

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
  double loader_images_per_second = 0;  // what the loader alone could deliver
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

// One writer per run directory: an advisory lock (flock) on <run>/.lock, held while the
// process lives, with the holder's pid in the file for the message another run gets. The
// directory is created first; nothing else is written before the lock is held.
class RunDirLock {
 public:
  explicit RunDirLock(const fs::path& run_dir) {
    create_output_directories(run_dir, "the run directory");
    const fs::path path = run_dir / ".lock";
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw InputError(file_message(path, std::string("cannot create the run directory's lock file: ") +
                                              std::strerror(errno)));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      std::string holder(32, '\0');
      const ssize_t n = ::pread(fd_, holder.data(), holder.size(), 0);
      holder.resize(n > 0 ? static_cast<size_t>(n) : 0);
      holder.erase(std::remove_if(holder.begin(), holder.end(), [](char c) { return c < '0' || c > '9'; }),
                   holder.end());
      ::close(fd_);
      fd_ = -1;
      if (err != EWOULDBLOCK)
        throw InputError(file_message(path, std::string("cannot lock the run directory: ") + std::strerror(err)));
      throw InputError(run_dir.string() + ": another convoy run is writing to this run directory (pid " +
                       (holder.empty() ? std::string("unknown") : holder) +
                       "); wait for it to finish, or give this run another name or output.dir");
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size()))
      throw InputError(file_message(path, std::string("cannot write the lock file: ") + std::strerror(errno)));
  }
  ~RunDirLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock; the file stays (unlinking it would race)
  }
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

 private:
  int fd_ = -1;
};

// Temporary files a killed writer left (write_safetensors' "<name>.safetensors.tmp.<pid>",
// the metrics rewrite's "metrics.csv.tmp.<pid>"). Called with the run's lock held: no other
// writer is at work in the directory.
void remove_stale_temporaries(const fs::path& run_dir, std::ostream& log) {
  static const std::regex stale(R"((.+\.safetensors|metrics\.csv)\.tmp\.[0-9]+)");
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(run_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file(error) || !std::regex_match(name, stale)) continue;
    if (fs::remove(entry.path(), error))
      log << "removed " << entry.path().string() << ", left by a writer that was killed" << std::endl;
  }
}

// Drops the rows of metrics.csv past `epochs_done` (and any torn last line).
void drop_metrics_rows_after(const fs::path& path, int64_t epochs_done) {
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string kept;
  bool dropped = false;
  size_t begin = 0;
  for (bool header = true; begin < text.size(); header = false) {
    const size_t end = text.find('\n', begin);
    if (end == std::string::npos) {  // a row cut short by a crash
      dropped = true;
      break;
    }
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    char* after = nullptr;
    const long long epoch = std::strtoll(line.c_str(), &after, 10);
    if (!header && (after == line.c_str() || *after != ',' || epoch > epochs_done)) {
      dropped = true;
      continue;
    }
    kept += line + "\n";
  }
  if (!dropped) return;
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kept;
    if (!out.flush()) throw InputError(tmp.string() + ": cannot write the metrics file");
  }
  std::error_code error;
  fs::rename(tmp, path, error);
  if (error) throw InputError(path.string() + ": cannot replace the metrics file: " + error.message());
}

std::unique_ptr<Backend> open_backend(const RunConfig& config, std::ostream& log) {
  BackendOptions options;
  options.deterministic = config.deterministic;
  options.benchmark = config.cudnn_benchmark;
  options.threads = static_cast<int>(config.threads);
  return select_backend(config.device, options, log);
}

std::string op_list(const std::vector<OpKind>& ops) {
  std::string list;
  for (OpKind op : ops) list += (list.empty() ? "" : ", ") + std::string(op_name(op));
  return list;
}

// The config's precision where the backend runs every op of the model in it; bf16 falls back
// to fp32 with one line saying why (the CPU path computes in fp32 only).
DType training_dtype(const RunConfig& config, const Model& model, Backend& backend, std::ostream& log) {
  const DType wanted = config.precision == "bf16" ? DType::bf16 : DType::f32;
  const Layout layout = choose_layout(config.layout, backend, wanted);
  if (wanted == DType::bf16) {
    const std::vector<OpKind> missing = model.unsupported_ops(backend.ops(), wanted, layout);
    if (missing.empty()) return wanted;
    log << "precision bf16: " << backend.device().str() << " does not run " << op_list(missing)
        << " in bf16; training in fp32" << std::endl;
  }
  const Layout f32_layout = choose_layout(config.layout, backend, DType::f32);
  const std::vector<OpKind> missing = model.unsupported_ops(backend.ops(), DType::f32, f32_layout);
  if (!missing.empty())
    throw DeviceError(backend.device().str() + " cannot train " + config.model_path + ": it does not run " +
                      op_list(missing) + " in fp32");
  return DType::f32;
}

std::unique_ptr<Dataset> load_split(const RunConfig& config, const std::string& split, int64_t limit) {
  DatasetSpec spec;
  spec.kind = config.dataset.kind;
  spec.path = config.dataset.path;
  spec.synthetic_shape = Shape(config.dataset.synthetic_shape.begin(), config.dataset.synthetic_shape.end());
  spec.synthetic_classes = config.dataset.synthetic_classes;
  spec.synthetic_size = config.dataset.synthetic_size;
  return load_dataset(spec, split, limit);
}

// The model's input, and the crops of the config that reach it.
Preprocess preprocess_of(const RunConfig& config, const Shape& input) {  // input: (C, H, W)
  const DatasetConfig& d = config.dataset;
  Preprocess p;
  p.channels = input[0];
  p.height = input[1];
  p.width = input[2];
  if (p.channels != 1 && p.channels != 3)
    throw InputError(config.model_path + ": image datasets feed 1 (gray) or 3 (RGB) input channels, the model takes " +
                     std::to_string(p.channels));
  p.resize = d.resize;
  p.random_resized_crop = d.random_resized_crop;
  p.scale_min = d.scale_min;
  p.scale_max = d.scale_max;
  p.ratio_min = d.ratio_min;
  p.ratio_max = d.ratio_max;
  return p;
}

Preprocess preprocess_of(const RunConfig& config, const Model& model) { return preprocess_of(config, model.input_shape()); }

// Decoding image files wants every core but one: the training thread that launches the
// device's work must not queue behind the decoders (measured on the H200 host, 16 cores:
// ResNet-50 from JPEGs lost 13% to synthetic data with 16 workers). In-memory data needs few.
int64_t loader_workers(const RunConfig& config, const Dataset& data) {
  if (config.dataset.workers > 0) return config.dataset.workers;
  const auto cores = std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()));
  if (data.stored_shape()) return std::min<int64_t>(4, cores);
  return std::max<int64_t>(1, cores - 1);
}

LoaderOptions train_loader_options(const RunConfig& config, const Dataset& data, const Preprocess& preprocess) {
  LoaderOptions o;
  o.batch_size = config.batch_size;
  o.shuffle = true;
  o.drop_last = true;
  o.seed = config.seed;
  o.mode = SampleMode::train;
  o.preprocess = preprocess;
  o.workers = loader_workers(config, data);
  o.skip_bad_samples = config.dataset.skip_bad_images;
  return o;
}

// The config's model file, with its classifier resized when the config says num_classes.
Model load_config_model(const RunConfig& config) {
  if (config.num_classes == 0) return Model::from_file(config.model_path, config.seed);
  const std::string yaml = Model::with_classes(Model::read_file(config.model_path), config.model_path, config.num_classes);
  return Model::from_yaml(yaml, config.model_path, config.seed);
}

// The config's model, checked against the data, on the backend in the training dtype.
Model build_model(const RunConfig& config, const Dataset& train_data, Backend& backend, std::ostream& log) {
  Model model = load_config_model(config);
  if (static_cast<size_t>(model.num_classes()) != train_data.class_names().size())
    throw InputError(config.model_path + ": model has " + std::to_string(model.num_classes()) +
                     " outputs but the dataset has " + std::to_string(train_data.class_names().size()) + " classes");
  if (config.dataset.mean.size() != 1 && config.dataset.mean.size() != static_cast<size_t>(model.input_shape()[0]))
    throw InputError(config.source + ": dataset.normalize has " + std::to_string(config.dataset.mean.size()) +
                     " channels, the model input has " + std::to_string(model.input_shape()[0]) +
                     " (give one value per channel, or one for all)");
  const DType dtype = training_dtype(config, model, backend, log);
  model.to(backend, dtype, choose_layout(config.layout, backend, dtype));
  return model;
}

TrainRecipe recipe_of(const RunConfig& config, const NormalizeAugment& normalize) {
  TrainRecipe recipe{config.optimizer, normalize, config.label_smoothing, config.seed};
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
        last_path_(run_dir_ / "last.safetensors"), best_path_(run_dir_ / "best.safetensors"), lock_(run_dir_),
        backend_(open_backend(config, log)),
        train_data_(load_split(config, config.dataset.train_split, config.dataset.train_limit)),
        test_data_(load_split(config, config.dataset.test_split, config.dataset.test_limit)),
        model_(build_model(config, *train_data_, *backend_, log)), dtype_(model_.compute_dtype()),
        preprocess_(preprocess_of(config, model_)),
        normalize_(make_normalize(config.dataset.mean, config.dataset.std)),
        step_(*backend_, model_, recipe_of(config, normalize_)), uploader_(backend_->make_batch_uploader()),
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
  void log_start() const;
  std::ofstream open_metrics() const;
  bool stop_requested() const;
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
  RunDirLock lock_;  // taken before the data is read: a second writer fails at once
  std::unique_ptr<Backend> backend_;
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
  remove_stale_temporaries(run_dir_, log_);
  resume();
  log_start();
  LoaderOptions train_options = train_loader_options(config_, *train_data_, preprocess_);
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
                     " is larger than the " + std::to_string(train_data_->size()) + " training images");
  total_steps_ = batches_ * config_.epochs;
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
    result_.skipped_steps += tally.skipped;
    end_epoch(tally, metrics);
  }
  return result_so_far(/*interrupted=*/false);
}

// Continues from last.safetensors when --resume asks for it and it is there.
void TrainingRun::resume() {
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
  log_ << "resuming " << source << " at epoch " << pos_.epoch + 1 << ", step " << pos_.step << std::endl;
}

void TrainingRun::log_start() const {
  log_ << "training " << model_.name() << " (" << model_.parameter_count() << " parameters) on "
       << backend_->describe() << ", " << (dtype_ == DType::bf16 ? "bf16 mixed precision" : "fp32")
       << (model_.layout() == Layout::nhwc ? ", channels-last" : "")
       << ", " << train_data_->size() << " training images (" << train_data_->name() << "), batch "
       << config_.batch_size << std::endl;
}

// metrics.csv: a resumed run appends to its rows, a new one starts the file over. Rows are
// written after the epoch's checkpoint; a resumed run still drops any row of an epoch its
// checkpoint does not hold (from a run that stopped between the two), so no epoch appears twice.
std::ofstream TrainingRun::open_metrics() const {
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

bool TrainingRun::stop_requested() const {
  return (options_.stop_requested && options_.stop_requested->load()) ||
         (options_.max_steps && pos_.step >= options_.max_steps);
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
      tally.images += batch.images.dim(0);
    } else {
      ++tally.skipped;
      tally.skipped_images += batch.images.dim(0);
    }
    ++pos_.step;
    ++pos_.batch;
    stopped = stop_requested();
    if (pos_.batch % config_.log_every == 0 || pos_.batch == batches_ || stopped || tally.pending.size() >= 64) {
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
  const double remaining_images = static_cast<double>((total_steps_ - pos_.step) * config_.batch_size);
  progress_.update(pos_.epoch + 1, config_.epochs, pos_.batch, batches_,
                   tally.loss_sum / static_cast<double>(std::max<int64_t>(1, tally.steps)),
                   static_cast<double>(tally.correct) / static_cast<double>(std::max<int64_t>(1, tally.images)), ips,
                   tally.loader_images_per_second, remaining_images / std::max(1.0, ips));
}

// Evaluation, the checkpoints (best when it is), then the metrics row and the epoch's line:
// a crash between the two leaves no row for an epoch that --resume trains again.
void TrainingRun::end_epoch(const EpochTally& tally, std::ostream& metrics) {
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
  const double loader_ips = tally.loader.busy_seconds > 0 ? static_cast<double>(tally.loader.samples) /
                                                                 tally.loader.busy_seconds * loader_workers(config_, *train_data_)
                                                           : 0;
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
  info.seed = config_.seed;
  info.optimizer = config_.optimizer.type;
  info.precision = config_.precision;
  info.test_accuracy = test_accuracy;
  info.best_accuracy = pos.best_accuracy;
  return info;
}

}  // namespace

TrainResult train(const RunConfig& config, const TrainOptions& options, std::ostream& log) {
  return TrainingRun(config, options, log).run();
}

double measure_loader(const RunConfig& config, int64_t batches, std::ostream& log) {
  const std::unique_ptr<Backend> backend = open_backend(config, log);
  const std::unique_ptr<Dataset> data = load_split(config, config.dataset.train_split, config.dataset.train_limit);
  // The input shape only, read from the YAML: building the model would initialize all its
  // weights (a quarter of a second for ResNet-50) for nothing. num_classes changes only the
  // classifier, never the input.
  const Preprocess preprocess =
      preprocess_of(config, Model::input_shape_of(Model::read_file(config.model_path), config.model_path));
  const std::unique_ptr<BatchUploader> uploader = backend->make_batch_uploader();
  LoaderOptions options = train_loader_options(config, *data, preprocess);
  options.host_empty = [&](Shape shape, DType dtype) { return uploader->host_empty(std::move(shape), dtype); };
  DataLoader loader(*data, options);
  const int64_t per_epoch = loader.batches_per_epoch();
  if (per_epoch == 0)
    throw InputError(config.source + ": batch_size " + std::to_string(config.batch_size) + " is larger than the " +
                     std::to_string(data->size()) + " training images");
  const int64_t total = batches > 0 ? batches : per_epoch;
  log << "loading " << total << " batches of " << config.batch_size << " from " << data->name() << " ("
      << data->size() << " images) with " << options.workers << " workers into " << shape_str({preprocess.channels,
      preprocess.height, preprocess.width}) << " on " << backend->device().str() << std::endl;
  const auto start = Clock::now();
  int64_t images = 0, skipped = 0;
  for (int64_t epoch = 0, done = 0; done < total; ++epoch) {
    loader.start_epoch(epoch);
    Batch batch;
    while (done < total && loader.next(batch)) {
      uploader->upload(batch.images);
      uploader->upload(batch.labels);
      images += batch.labels.dim(0);
      ++done;
    }
    skipped += loader.stats().skipped;
  }
  backend->synchronize();
  const double seconds = seconds_since(start);
  const double rate = static_cast<double>(images) / seconds;
  log << std::fixed << std::setprecision(0) << "loader: " << images << " images in " << std::setprecision(2)
      << seconds << " s, " << std::setprecision(0) << rate << " img/s" << (skipped ? ", skipped " : "")
      << (skipped ? std::to_string(skipped) : "") << std::defaultfloat << std::endl;
  return rate;
}

}  // namespace convoy
