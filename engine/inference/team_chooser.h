#pragma once
// TeamChooser: the OpenMP team of each CPU inference pass, chosen from the passes themselves,
// for cores that other processes share. A team waits at every barrier for its slowest thread;
// with one busy process beside it on 2 cores, a thread that lost its core for a time slice stalls
// the whole pass (fmnet at batch 32 at 0.56x ONNX Runtime, batch 1's p99 30x its p50: issue 39),
// while a smaller team whose threads each keep a core runs at full speed. So a plan runs the full
// team while nothing competes; when its passes show contention (the team gets less than its
// cores' time, or its passes vary), it tries the next smaller team (half, down to 1) for a few
// passes and keeps it unless it is slower; from time to time it tries the larger team again, and
// keeps that if it is clearly faster, to come back when the cores are free.
// Tries cost at most about 1% of the time (each waits a hundred times its own length, doubling
// while they lose), and none happen on a quiet machine. Pure logic: InferencePlan times passes
// and reads the process's CPU time (tests feed it numbers).
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

  // The process's CPU time (all its threads), a wall clock, and the machine's idle CPU time (all
  // its CPUs; negative where unknown), in seconds.
  struct Usage {
    double cpu = 0, wall = 0, idle = -1;
  };
  // The pass just run with threads() took `seconds`. `usage` is read once per block of passes,
  // not per pass (getrusage costs a few percent of LeNet-5's pass at batch 1).
  void record(double seconds, const std::function<Usage()>& usage);

  // A block closes after this many passes and this much pass time, whichever is later.
  static constexpr int kBlockPasses = 3;  // few: ResNet-18 at batch 1 on 2 contended cores takes 60 ms a pass
  static constexpr double kBlockSeconds = 0.02;
  // Contention, in a block of back-to-back passes (they fill this share of its wall time): the
  // team got less than this share of its cores' time. Between passes and at barriers its
  // threads spin (GOMP_SPINCOUNT), so on free cores they use about all of it (92-108% a block
  // on the 2-core VM, a rare one lower); beside one busy process about half (48-52%).
  // Preemptions do not tell them apart: a quiet VM preempts the team 100-250 times a second
  // (kernel threads), about as often as a busy process does.
  static constexpr double kBackToBack = 0.9;
  static constexpr double kCpuShare = 0.85;
  // Or, with gaps between passes (a server), a block's mean pass over its fastest by this much:
  // a stalled barrier (not the first block: the plan's first passes page in its memory).
  static constexpr double kVaried = 2.0;
  // A try: this many passes at the other team, and kBlockSeconds without the first (its threads
  // wake, its caches fill), which is left out: a contended team's passes are mostly fast with a
  // few stalled a time slice long, so a short try would miss what makes it slow. A larger team
  // wins when its mean is under kWinMargin of the block before it; a smaller one, tried only
  // under contention, when it is no slower (kDownMargin): at the same mean its passes are the
  // steadier, each thread keeping a core instead of waiting at barriers for one that lost its
  // own (ResNet-18 at batch 32 beside a busy process kept the team of 2 and had one pass of 4.9
  // times the median, issue 39). The two margins keep a move from being undone at once.
  static constexpr int kProbePasses = 3;
  static constexpr double kWinMargin = 0.85;
  static constexpr double kDownMargin = 1.0;
  // Pass time between tries: at least their cost over this (1%), times a back-off that doubles
  // while tries in that direction lose, up to kMaxBackoff.
  static constexpr double kProbeBudget = 0.01;
  static constexpr int kMaxBackoff = 16;  // a try of the full team at least every ~50 s of passes
  // A larger team is tried only when the last block saw at least this many cores idle besides
  // the team's (where the machine's idle time is known): while another process keeps the other
  // cores busy, such a try only adds stalled passes to the tail (fmnet at batch 32: a pass 6.5
  // times the median, issue 39); when it stops, a core goes idle and the try comes at once.
  static constexpr double kIdleForLarger = 0.5;

 private:
  void close_block(const std::function<Usage()>& usage);
  void finish_probe();
  bool affordable(int backoff) const;

  std::vector<int> teams_;
  int level_ = 0;
  // The current block of passes at level_.
  int block_passes_ = 0;
  double block_seconds_ = 0, block_min_ = 0;
  Usage block_start_;
  bool block_started_ = false;  // block_start_ read
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
  double previous_mean_ = 0;     // the block before the last at level_ (0: none)
  int blocks_at_level_ = 0;      // closed since level_ was chosen
  bool verify_up_ = false;       // just moved down: try the larger team again soon
  double idle_cores_ = -1;       // idle cores in the last block (negative: unknown)
};

}  // namespace convoy
