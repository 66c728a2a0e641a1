// convoy train --config configs/x.yaml [--set key=value]... [--resume] [--init-weights F [--init-weights-strict]] [--gpus N]
#include <csignal>
#include <iomanip>
#include <iostream>

#include "cli/commands.h"
#include "engine/core/error.h"
#include "engine/core/stop_signals.h"
#include "engine/config/run_config.h"
#include "engine/distributed/launcher.h"
#include "engine/distributed/world.h"
#include "engine/train/trainer.h"

namespace convoy::cli {

namespace {

// SIGTERM (docker stop, Kubernetes preemption) and SIGINT ask the trainer to checkpoint and
// stop: a StopSignalWatcher's thread sets this flag, and stop_signal to the first such signal.
std::atomic<bool> stop_requested{false};
std::atomic<int> stop_signal{0};

// The exit status of a run stopped by a signal: the shell's 128 + the signal (130 for Ctrl-C,
// 143 for SIGTERM); 0 when no signal asked for the stop.
int stopped_status() { return stop_requested.load() ? 128 + stop_signal.load() : 0; }

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  bool resume = false;
  std::string init_weights;
  bool init_weights_strict = false;
  int64_t max_steps = 0;
  int64_t data_only = -1;  // >= 0: measure the loader over this many batches (0 = one epoch)
  int gpus = 1;            // > 1: one process per GPU of this host (torchrun's --nproc-per-node)
};

// The same command for each rank's process, without --gpus.
std::vector<std::string> rank_arguments(const TrainArgs& args) {
  std::vector<std::string> out = {"train", "--config", args.config};
  for (const std::string& o : args.overrides) out.insert(out.end(), {"--set", o});
  if (args.resume) out.push_back("--resume");
  if (!args.init_weights.empty()) out.insert(out.end(), {"--init-weights", args.init_weights});
  if (args.init_weights_strict) out.push_back("--init-weights-strict");
  if (args.max_steps) out.insert(out.end(), {"--max-steps", std::to_string(args.max_steps)});
  return out;
}

int run_train(const TrainArgs& args, const EngineOptions& engine) {
  const RunConfig config = load_run_config(args.config, args.overrides);
  const WorldInfo world = world_from_env(process_env());
  if (args.gpus > 1) {
    if (world.distributed())
      throw InputError("--gpus " + std::to_string(args.gpus) + " inside a job that is already distributed (" +
                       world.source + " says rank " + std::to_string(world.rank) + " of " +
                       std::to_string(world.world_size) + "): leave --gpus out under mpirun or Kubernetes");
    if (args.data_only >= 0) throw InputError("--data-only measures one loader: leave --gpus out");
    LaunchOptions launch;
    launch.program = "/proc/self/exe";
    launch.args = rank_arguments(args);
    launch.ranks = args.gpus;
    return launch_local(launch, std::cerr);
  }
  if (args.data_only >= 0) {
    measure_loader(config, engine, args.data_only, std::cout);
    return 0;
  }
  // Before the first thread of the run starts (see stop_signals.h for why not a handler).
  BlockedStopSignals blocked;
  StopSignalWatcher watcher([](int signal) {
    int none = 0;
    stop_signal.compare_exchange_strong(none, signal);  // the first signal names the stop
    stop_requested.store(true);
  });
  TrainOptions options;
  options.resume = args.resume;
  options.max_steps = args.max_steps;
  // The command line's --init-weights wins over the config's init_weights.
  options.init_weights = args.init_weights.empty() ? config.init_weights : args.init_weights;
  options.init_weights_strict = args.init_weights.empty() ? config.init_weights_strict : args.init_weights_strict;
  options.stop_requested = &stop_requested;
  options.world = world;
  options.engine = engine;
  if (world.rank > 0) {
    // One log for the job (rank 0's); the others speak up only when they fail.
    try {
      const TrainResult r = train(config, options, std::cout);
      return r.interrupted ? stopped_status() : 0;
    } catch (const Error&) {
      std::cerr << "convoy: rank " << world.rank << " of " << world.world_size << " failed:" << std::endl;
      throw;
    }
  }
  const TrainResult r = train(config, options, std::cout);
  std::cout << std::fixed << std::setprecision(2);
  if (r.interrupted) {
    std::cout << "interrupted after " << r.steps << " steps; resume with --resume" << std::endl;
    return stopped_status();
  }
  std::cout << "done: " << r.epochs_done << " epochs on " << r.device << " in " << std::setprecision(1)
            << r.train_seconds << " s of training";
  if (r.setup_seconds > 0) std::cout << " (+" << std::setprecision(2) << r.setup_seconds << " s of set-up)";
  std::cout << "; test accuracy " << std::setprecision(2)
            << r.test_accuracy * 100 << "% (best " << r.best_accuracy * 100 << "%); checkpoints in "
            << r.run_dir << "/";
  if (r.skipped_steps) std::cout << "; skipped " << r.skipped_steps << " steps with a non-finite loss or gradients";
  std::cout << std::endl;
  return 0;
}

}  // namespace

void add_train_command(CLI::App& app, Action& chosen) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model from a run config");
  cmd->add_option("--config,-c", args->config, "run config YAML, e.g. configs/fashion_mnist.yaml")->required();
  cmd->add_option("--set", args->overrides, "override a config key: --set optimizer.lr=0.05 (repeatable)");
  cmd->add_flag("--resume", args->resume, "continue from <output>/<name>/last.safetensors if it exists");
  cmd->add_option("--init-weights", args->init_weights,
                  "start from these weights (safetensors: a torchvision state dict or a Convoy checkpoint) "
                  "where names and shapes match, reporting the rest (a prefix every name has, as DataParallel's "
                  "'module.', is stripped; F16 and BF16 are converted); a file of which nothing loads is an error");
  cmd->add_flag("--init-weights-strict", args->init_weights_strict,
                "with --init-weights: a missing, unexpected or mis-shaped tensor is an error (the classifier "
                "resized by num_classes excepted)");
  // 0 is refused, not taken as "no limit" (the trainer's own 0): read as "zero steps" it would be
  // a run that trains nothing, and leaving the flag out already means no limit.
  cmd->add_option("--max-steps", args->max_steps,
                  "stop with a checkpoint after this many optimizer steps in total (1 or more; counted from the "
                  "run's start, so a --resume'd run stops at the same step); leave it out for no limit")
      ->check(CLI::Validator(
          [](const std::string& value) -> std::string {
            if (value == "0") return "--max-steps 0 would train no step: give 1 or more, or leave it out for no limit";
            return "";
          },
          "", "NOT_ZERO"))
      ->check(CLI::PositiveNumber);
  cmd->add_option("--data-only", args->data_only,
                  "measure the data loader alone over N batches (0 = one epoch): images/s, no training")
      ->expected(0, 1)->default_str("0")->check(CLI::NonNegativeNumber);
  cmd->add_option("--gpus", args->gpus,
                  "data-parallel training on N GPUs of this host: one process each (as torchrun; under mpirun "
                  "or Kubernetes leave it out, the ranks come from the environment)")
      ->check(CLI::Range(1, 1024));
  cmd->callback([args, &chosen] { chosen = [args](const EngineOptions& engine) { return run_train(*args, engine); }; });
}

}  // namespace convoy::cli
