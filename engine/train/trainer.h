#pragma once
// The training loop: data, forward, loss, backward, optimizer, per-epoch evaluation,
// metrics.csv, atomic checkpoints (last and best) and exact resume.
#include <atomic>
#include <iosfwd>
#include <string>
#include <vector>

#include "engine/config/run_config.h"
#include "engine/core/engine_options.h"
#include "engine/distributed/world.h"

namespace convoy {

class Communicator;

struct TrainOptions {
  bool resume = false;  // continue from <run>/last.safetensors when it exists
  int64_t max_steps = 0;  // stop (with a checkpoint) after this many steps in total; 0 = no limit
  // A new run starts from these weights (safetensors: a torchvision state dict or a Convoy
  // checkpoint) where names and shapes match; strict: any mismatch is an error. A resumed run
  // keeps its checkpoint's.
  std::string init_weights;
  bool init_weights_strict = false;
  const std::atomic<bool>* stop_requested = nullptr;  // set by SIGTERM/SIGINT: checkpoint and stop
  // Tests: the loss of these steps (0-based run step indices) reads as NaN, as from a diverged
  // step, without one (nan_policy's paths on demand).
  std::vector<int64_t> nonfinite_loss_steps;
  // Tests: these steps' first parameter gets an infinite gradient (in device memory, before the
  // optimizer), for the gradient checks to find.
  std::vector<int64_t> nonfinite_gradient_steps;
  // This process's place in a data-parallel job (world_from_env); a world of one by default.
  // Every rank trains its shard; rank 0 alone logs, evaluates and writes the run directory.
  WorldInfo world;
  // Tests: a rank of a simulated world (make_thread_world) instead of the one `world` makes.
  Communicator* communicator = nullptr;
  // The tunables (cli: the environment's): fusion, CUDA graphs, the CUDA backend's switches, the
  // nvJPEG backend, the data volume, and the fault-injection test hook.
  EngineOptions engine;
};

struct TrainResult {
  std::string run_dir;
  std::string device;
  int64_t epochs_done = 0;  // complete epochs
  int64_t steps = 0;
  double test_accuracy = 0;  // after the last complete epoch
  double best_accuracy = 0;
  double train_seconds = 0;  // this process's training time, evaluation excluded
  double setup_seconds = 0;  // the first step's one-time work, done before the clock (TrainStep::prepare)
  bool interrupted = false;  // stopped early by a signal or max_steps
  int64_t skipped_steps = 0;  // nan_policy: skip_step, in this process
};

TrainResult train(const RunConfig& config, const TrainOptions& options, std::ostream& log);

// The training data path alone (`convoy train --data-only`): `batches` batches (0 = one epoch)
// read, decoded, cropped and copied to the device as training would, with no model step.
// Returns the images per second delivered.
double measure_loader(const RunConfig& config, const EngineOptions& engine, int64_t batches, std::ostream& log);

}  // namespace convoy
