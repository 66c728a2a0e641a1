#pragma once
// TeamChooser: the OpenMP team of each CPU inference pass, chosen from the passes themselves,
// for cores that other processes share. A team waits at every barrier for its slowest thread;
// with one busy process beside it on 2 cores, a thread that lost its core for a time slice stalls
// the whole pass (fmnet at batch 32 at 0.56x ONNX Runtime, batch 1's p99 30x its p50: issue 39),
// while a smaller team whose threads each keep a core runs at full speed. So a plan runs the full
// team while nothing competes; when its passes show contention (the process is preempted, or
// passes vary), it tries the next smaller team (half, down to 1) for a few passes and keeps the
// faster; from time to time it tries the larger team again, to come back when the cores are free.
// Tries cost at most about 1% of the time (each waits a hundred times its own length, doubling
// while they lose), and none happen on a quiet machine. Pure logic: InferencePlan times passes
// and reads the preemption count (tests feed it numbers).
#include <cstdint>
#include <functional>
#include <vector>

namespace convoy {

class TeamChooser {
 public:
  // `threads`: the full team (>= 1). The teams tried: threads, threads/2, ..., 1.
  explicit TeamChooser(int threads);

  // The team of the next pass.
  int threads() const { return teams_[probing_ ? probe_level_ : level_]; }
  // The team the plan runs at when not trying another (teams()[level]).
  int chosen() const { return teams_[level_]; }
  const std::vector<int>& teams() const { return teams_; }
  bool probing() const { return probing_; }

  // The pass just run with threads() took `seconds`. `preemptions` returns the process's
  // involuntary context switches so far; it is called once per block of passes, not per pass
  // (getrusage costs a few percent of LeNet-5's pass at batch 1).
  void record(double seconds, const std::function<int64_t()>& preemptions);

  // A block closes after this many passes and this much pass time, whichever is later.
  static constexpr int kBlockPasses = 8;
  static constexpr double kBlockSeconds = 0.02;
  // Contention: a block's mean pass over its fastest by this much (not the first block), or this many preemptions per
  // second of passes (a quiet machine has a few a second: kernel threads, timers).
  static constexpr double kVaried = 1.3;
  static constexpr double kPreemptionsPerSecond = 50;
  // A try: this many passes at the other team, and kBlockSeconds without the first (its threads
  // wake, its caches fill), which is left out: a contended team's passes are mostly fast with a
  // few stalled a time slice long, so a short try would miss what makes it slow. It wins when
  // its mean is under this share of the block before it.
  static constexpr int kProbePasses = 3;
  static constexpr double kWinMargin = 0.85;
  // Pass time between tries: at least their cost over this (1%), times a back-off that doubles
  // while tries in that direction lose, up to kMaxBackoff.
  static constexpr double kProbeBudget = 0.01;
  static constexpr int kMaxBackoff = 16;  // a try of the full team at least every ~50 s of passes

 private:
  void close_block(const std::function<int64_t()>& preemptions);
  void finish_probe();
  bool affordable(int backoff) const;

  std::vector<int> teams_;
  int level_ = 0;
  // The current block of passes at level_.
  int block_passes_ = 0;
  double block_seconds_ = 0, block_min_ = 0;
  int64_t block_start_preemptions_ = -1;  // -1: not read yet
  // Tries.
  bool probing_ = false;
  int probe_level_ = 0;
  std::vector<double> probe_seconds_;
  double reference_ = 0;  // the mean pass of the block before the try
  double since_probe_ = 1e30;  // pass seconds since the last try ended (none yet: the first is affordable)
  int blocks_ = 0;  // closed so far; the first holds the plan's first passes (page faults, cold caches)
  double last_probe_cost_ = 0;
  int backoff_down_ = 1, backoff_up_ = 1;
  bool was_contended_ = false;  // the last block's verdict
};

}  // namespace convoy
