// convoy train --config configs/x.yaml [--set key=value]... [--resume] [--init-weights F [--init-weights-strict]]
#include <csignal>
#include <iomanip>
#include <iostream>

#include "cli/commands.h"
#include "engine/config/run_config.h"
#include "engine/train/trainer.h"

namespace convoy::cli {

namespace {

// The one process-wide flag: a signal handler can reach nothing else. SIGTERM (docker
// stop, Kubernetes preemption) and SIGINT ask the trainer to checkpoint and stop.
std::atomic<bool> stop_requested{false};
extern "C" void request_stop(int) { stop_requested.store(true); }

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  bool resume = false;
  std::string init_weights;
  bool init_weights_strict = false;
  int64_t max_steps = 0;
  int64_t data_only = -1;  // >= 0: measure the loader over this many batches (0 = one epoch)
};

int run_train(const TrainArgs& args) {
  const RunConfig config = load_run_config(args.config, args.overrides);
  if (args.data_only >= 0) {
    measure_loader(config, args.data_only, std::cout);
    return 0;
  }
  std::signal(SIGTERM, request_stop);
  std::signal(SIGINT, request_stop);
  TrainOptions options;
  options.resume = args.resume;
  options.max_steps = args.max_steps;
  // The command line's --init-weights wins over the config's init_weights.
  options.init_weights = args.init_weights.empty() ? config.init_weights : args.init_weights;
  options.init_weights_strict = args.init_weights.empty() ? config.init_weights_strict : args.init_weights_strict;
  options.stop_requested = &stop_requested;
  const TrainResult r = train(config, options, std::cout);
  std::cout << std::fixed << std::setprecision(2);
  if (r.interrupted) {
    std::cout << "interrupted after " << r.steps << " steps; resume with --resume" << std::endl;
    return stop_requested.load() ? 128 + SIGTERM : 0;
  }
  std::cout << "done: " << r.epochs_done << " epochs on " << r.device << " in " << std::setprecision(1)
            << r.train_seconds << " s of training; test accuracy " << std::setprecision(2)
            << r.test_accuracy * 100 << "% (best " << r.best_accuracy * 100 << "%); checkpoints in "
            << r.run_dir << "/";
  if (r.skipped_steps) std::cout << "; skipped " << r.skipped_steps << " steps with a non-finite loss";
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
                  "where names and shapes match, reporting the rest");
  cmd->add_flag("--init-weights-strict", args->init_weights_strict,
                "with --init-weights: a missing, unexpected or mis-shaped tensor is an error (the classifier "
                "resized by num_classes excepted)");
  cmd->add_option("--max-steps", args->max_steps, "stop with a checkpoint after this many steps in total")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--data-only", args->data_only,
                  "measure the data loader alone over N batches (0 = one epoch): images/s, no training")
      ->expected(0, 1)->default_str("0")->check(CLI::NonNegativeNumber);
  cmd->callback([args, &chosen] { chosen = [args] { return run_train(*args); }; });
}

}  // namespace convoy::cli
