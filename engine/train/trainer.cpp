#include "engine/train/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "datasets/dataset.h"
#include "datasets/loader.h"
#include "engine/core/error.h"
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
              double accuracy, double images_per_second, double eta_seconds) {
    const bool last = batch == batches;
    if (tty_) {
      if (!last && seconds_since(last_draw_) < 0.2) return;
      last_draw_ = Clock::now();
      const int width = 24;
      const int filled = static_cast<int>(width * batch / std::max<int64_t>(1, batches));
      log_ << "\r\033[Kepoch " << epoch << "/" << epochs << " [" << std::string(filled, '=')
           << (filled < width ? ">" : "") << std::string(std::max(0, width - filled - 1), ' ')
           << "] " << batch << "/" << batches << line(loss, accuracy, images_per_second, eta_seconds)
           << std::flush;
    } else if (batch % log_every_ == 0 || last) {
      log_ << "epoch " << epoch << "/" << epochs << " step " << batch << "/" << batches
           << line(loss, accuracy, images_per_second, eta_seconds) << std::endl;
    }
  }
  void end_epoch() {
    if (tty_) log_ << "\n";
  }

 private:
  static std::string line(double loss, double accuracy, double ips, double eta) {
    std::ostringstream out;
    out << std::fixed << std::setprecision(4) << "  loss " << loss << std::setprecision(2)
        << "  acc " << accuracy * 100 << "%  " << std::setprecision(0) << ips << " img/s  ETA "
        << format_duration(eta);
    return out.str();
  }
  std::ostream& log_;
  bool tty_;
  int64_t log_every_;
  Clock::time_point last_draw_{};
};

struct Position {
  int64_t epoch = 0;  // the epoch in progress (0-based)
  int64_t batch = 0;  // batches of it already done
  int64_t step = 0;   // optimizer steps in total
  double best_accuracy = 0;
};

RunCheckpointInfo checkpoint_info(const RunConfig& config, const Model& model, const Dataset& data,
                                  const Position& pos, double test_accuracy) {
  RunCheckpointInfo info;
  info.model_yaml = model.yaml();
  info.config_yaml = config.resolved_yaml;
  info.class_names = data.class_names;
  info.input_shape = model.input_shape();
  info.mean = config.dataset.mean;
  info.std = config.dataset.std;
  info.epoch = pos.epoch;
  info.batch_in_epoch = pos.batch;
  info.step = pos.step;
  info.seed = config.seed;
  info.optimizer = config.optimizer.type;
  info.precision = config.precision;
  info.test_accuracy = test_accuracy;
  info.best_accuracy = pos.best_accuracy;
  return info;
}

}  // namespace

TrainResult train(const RunConfig& config, const TrainOptions& options, std::ostream& log) {
  const fs::path run_dir = fs::path(config.output_dir) / config.name;
  const fs::path last_path = run_dir / "last.safetensors";
  const fs::path best_path = run_dir / "best.safetensors";

  BackendOptions backend_options;
  backend_options.deterministic = config.deterministic;
  backend_options.benchmark = config.cudnn_benchmark;
  backend_options.threads = static_cast<int>(config.threads);
  std::unique_ptr<Backend> backend = select_backend(config.device, backend_options, log);
  const DType compute = config.precision == "bf16" ? DType::bf16 : DType::f32;
  if (compute == DType::bf16 && backend->device().is_cpu()) {
    log << "precision bf16 is a GPU precision; the CPU path trains in fp32" << std::endl;
  }
  const DType used = backend->device().is_cpu() ? DType::f32 : compute;

  const Dataset train_data = load_dataset(config.dataset.kind, config.dataset.path,
                                          config.dataset.train_split, config.dataset.train_limit);
  const Dataset test_data = load_dataset(config.dataset.kind, config.dataset.path,
                                         config.dataset.test_split, config.dataset.test_limit);

  Model model = Model::from_file(config.model_path, config.seed);
  if (Shape(train_data.images.shape().begin() + 1, train_data.images.shape().end()) != model.input_shape())
    throw InputError(config.model_path + ": model input " + shape_str(model.input_shape()) +
                     " does not match the dataset's images " + shape_str(train_data.images.shape()));
  if (static_cast<size_t>(model.num_classes()) != train_data.class_names.size())
    throw InputError(config.model_path + ": model has " + std::to_string(model.num_classes()) +
                     " outputs but the dataset has " + std::to_string(train_data.class_names.size()) + " classes");
  if (config.dataset.mean.size() != static_cast<size_t>(model.input_shape()[0]))
    throw InputError(config.source + ": dataset.normalize has " + std::to_string(config.dataset.mean.size()) +
                     " channel(s), the model input has " + std::to_string(model.input_shape()[0]));
  model.to(*backend, used, choose_layout(config.layout, *backend, used));
  NormalizeAugment augment = make_normalize(config.dataset.mean, config.dataset.std);
  const NormalizeAugment plain = augment;
  augment.crop_padding = config.dataset.crop_padding;
  augment.horizontal_flip = config.dataset.horizontal_flip;
  TrainStep train_step(*backend, model, TrainRecipe{config.optimizer, augment, config.label_smoothing, config.seed});
  Optimizer& optimizer = train_step.optimizer();

  Position pos;
  double resumed_accuracy = 0;  // the last evaluation before a resume, for a finished run
  if (options.resume && fs::exists(last_path)) {
    const RunCheckpoint ckpt = read_run_checkpoint(last_path, CheckpointUse::resume);
    const std::string source = last_path.string();
    if (ckpt.info.model_yaml != model.yaml())
      throw InputError(source + ": the checkpoint was trained with another model than " + config.model_path);
    model.load_state(ckpt.tensors, source);
    pos.epoch = ckpt.info.epoch;
    pos.batch = ckpt.info.batch_in_epoch;
    pos.step = ckpt.info.step;
    pos.best_accuracy = ckpt.info.best_accuracy;
    resumed_accuracy = ckpt.info.test_accuracy;
    optimizer.load_state(ckpt.tensors, pos.step, source);
    model.refresh_compute_weights(*backend);
    log << "resuming " << source << " at epoch " << pos.epoch + 1 << ", step " << pos.step << std::endl;
  } else if (options.resume) {
    log << "no checkpoint at " << last_path.string() << "; starting a new run" << std::endl;
  }
  fs::create_directories(run_dir);

  log << "training " << model.name() << " (" << model.parameter_count() << " parameters) on "
      << backend->describe() << ", " << (used == DType::bf16 ? "bf16 mixed precision" : "fp32")
      << (model.layout() == Layout::nhwc ? ", channels-last" : "")
      << ", " << train_data.images.dim(0) << " training images, batch " << config.batch_size << std::endl;

  DataLoader loader(train_data, config.batch_size, /*shuffle=*/true, /*drop_last=*/true, config.seed);
  const int64_t batches = loader.batches_per_epoch();
  if (batches == 0)
    throw InputError(config.source + ": batch_size " + std::to_string(config.batch_size) +
                     " is larger than the " + std::to_string(train_data.images.dim(0)) + " training images");
  const int64_t total_steps = batches * config.epochs;

  const fs::path metrics_path = run_dir / "metrics.csv";
  const bool new_metrics = !fs::exists(metrics_path) || pos.step == 0;
  std::ofstream metrics(metrics_path, new_metrics ? std::ios::trunc : std::ios::app);
  if (!metrics) throw InputError(metrics_path.string() + ": cannot write the metrics file");
  if (new_metrics)
    metrics << "epoch,step,lr,train_loss,train_accuracy,test_loss,test_accuracy,epoch_seconds,images_per_second\n";

  TrainResult result;
  result.run_dir = run_dir.string();
  result.device = backend->device().str();
  result.best_accuracy = pos.best_accuracy;
  result.test_accuracy = resumed_accuracy;
  Progress progress(log, config.log_every);
  const auto run_start = Clock::now();
  double eval_seconds = 0;

  for (; pos.epoch < config.epochs; ++pos.epoch, pos.batch = 0) {
    loader.start_epoch(pos.epoch, pos.batch);
    const auto epoch_start = Clock::now();
    double loss_sum = 0, lr = 0;
    int64_t correct = 0, seen = 0, epoch_images = 0;
    // Per-step results stay on the device until they are printed: no sync every step.
    std::vector<std::pair<Tensor, Tensor>> pending;
    auto flush = [&] {
      for (auto& [loss, hits] : pending) {
        loss_sum += loss.to_floats()[0];
        correct += static_cast<int64_t>(hits.to_floats()[0]);
      }
      pending.clear();
    };
    Batch batch;
    while (loader.next(batch)) {
      const int64_t n = batch.images.dim(0);
      lr = scheduled_lr(config.schedule, config.optimizer.lr, pos.step, batches, total_steps);
      const Tensor images = backend->upload(batch.images);  // (N, C, H, W) u8
      const Tensor labels = backend->upload(batch.labels);  // (N) i32
      const TrainStepOutput out = train_step.run(images, labels, pos.step, lr);
      pending.emplace_back(out.loss, out.hits);
      ++pos.step;
      ++pos.batch;
      seen += 1;
      epoch_images += n;

      const bool stop = (options.stop_requested && options.stop_requested->load()) ||
                        (options.max_steps && pos.step >= options.max_steps);
      if (pos.batch % config.log_every == 0 || pos.batch == batches || stop || pending.size() >= 64) {
        flush();
        const double elapsed = seconds_since(epoch_start);
        const double ips = static_cast<double>(epoch_images) / std::max(1e-9, elapsed);
        const double remaining_images = static_cast<double>((total_steps - pos.step) * config.batch_size);
        progress.update(pos.epoch + 1, config.epochs, pos.batch, batches, loss_sum / static_cast<double>(seen),
                        static_cast<double>(correct) / static_cast<double>(seen * config.batch_size),
                        ips, remaining_images / std::max(1.0, ips));
      }
      if (stop) {
        flush();
        progress.end_epoch();
        backend->synchronize();
        save_run_checkpoint(last_path, model, &optimizer,
                            checkpoint_info(config, model, train_data, pos, result.test_accuracy));
        log << "stopped at epoch " << pos.epoch + 1 << ", step " << pos.step << "; checkpoint "
            << last_path.string() << " (continue with --resume)" << std::endl;
        result.interrupted = true;
        result.steps = pos.step;
        result.epochs_done = pos.epoch;
        result.train_seconds = seconds_since(run_start) - eval_seconds;
        return result;
      }
    }
    flush();
    progress.end_epoch();
    backend->synchronize();
    const double epoch_seconds = seconds_since(epoch_start);

    const auto eval_start = Clock::now();
    const EvalResult eval = evaluate(model, *backend, test_data, std::max<int64_t>(config.batch_size, 256), plain);
    eval_seconds += seconds_since(eval_start);
    result.test_accuracy = eval.accuracy;
    const bool is_best = eval.accuracy > pos.best_accuracy;
    if (is_best) pos.best_accuracy = eval.accuracy;
    result.best_accuracy = pos.best_accuracy;

    const double train_loss = loss_sum / std::max<int64_t>(1, seen);
    const double train_acc = static_cast<double>(correct) / std::max<int64_t>(1, epoch_images);
    metrics << pos.epoch + 1 << ',' << pos.step << ',' << lr << ',' << train_loss << ',' << train_acc << ','
            << eval.loss << ',' << eval.accuracy << ',' << epoch_seconds << ','
            << static_cast<double>(epoch_images) / epoch_seconds << std::endl;
    log << std::fixed << std::setprecision(2) << "epoch " << pos.epoch + 1 << "/" << config.epochs
        << ": train loss " << std::setprecision(4) << train_loss << ", test loss " << eval.loss
        << std::setprecision(2) << ", test accuracy " << eval.accuracy * 100 << "% ("
        << std::setprecision(1) << epoch_seconds << " s, "
        << std::setprecision(0) << static_cast<double>(epoch_images) / epoch_seconds << " img/s)"
        << (is_best ? " *best" : "") << std::defaultfloat << std::endl;

    Position done = pos;
    done.epoch += 1;
    done.batch = 0;
    const RunCheckpointInfo info = checkpoint_info(config, model, train_data, done, eval.accuracy);
    if (is_best) save_run_checkpoint(best_path, model, nullptr, info);
    save_run_checkpoint(last_path, model, &optimizer, info);
  }
  result.steps = pos.step;
  result.epochs_done = pos.epoch;
  result.train_seconds = seconds_since(run_start) - eval_seconds;
  return result;
}

}  // namespace convoy
