#include "engine/inference/team_chooser.h"

#include <algorithm>
#include <numeric>

namespace convoy {

TeamChooser::TeamChooser(int threads) {
  for (int t = std::max(1, threads);; t /= 2) {
    teams_.push_back(t);
    if (t == 1) break;
  }
}

void TeamChooser::record(double seconds, const std::function<Usage()>& usage) {
  seconds = std::max(0.0, seconds);
  if (probing_) {
    probe_seconds_.push_back(seconds);
    const double counted = std::accumulate(probe_seconds_.begin() + 1, probe_seconds_.end(), 0.0);
    if (static_cast<int>(probe_seconds_.size()) >= kProbePasses && counted >= kBlockSeconds) finish_probe();
    return;
  }
  if (!block_started_ && usage) {
    // Read after this pass: the block's CPU and wall time cover the passes after it.
    block_start_ = usage();
    block_started_ = true;
    return;
  }
  block_min_ = block_passes_ == 0 ? seconds : std::min(block_min_, seconds);
  ++block_passes_;
  block_seconds_ += seconds;
  since_probe_ += seconds;
  if (block_passes_ >= kBlockPasses && block_seconds_ >= kBlockSeconds) close_block(usage);
}

bool TeamChooser::affordable(int backoff) const {
  const double cost = last_probe_cost_ > 0 ? last_probe_cost_ : kProbePasses * reference_;
  return since_probe_ >= backoff * cost / kProbeBudget;
}

void TeamChooser::close_block(const std::function<Usage()>& usage) {
  const double mean = block_seconds_ / block_passes_;
  bool starved = false;
  if (usage && block_started_) {
    const Usage now = usage();
    const double wall = now.wall - block_start_.wall;
    if (wall > 0 && block_seconds_ >= kBackToBack * wall)
      starved = now.cpu - block_start_.cpu < kCpuShare * wall * teams_[level_];
    idle_cores_ = wall > 0 && now.idle >= 0 && block_start_.idle >= 0 ? (now.idle - block_start_.idle) / wall : -1;
    block_start_ = now;
  }
  const bool first = blocks_++ == 0;
  const bool contended = starved || (!first && mean > kVaried * block_min_);
  block_passes_ = 0;
  block_seconds_ = 0;
  // A try must beat both of the last two blocks: one slowed by a passing glitch (another
  // process's moment, the plan's first passes) is no reason to give up the team.
  reference_ = previous_mean_ > 0 ? std::min(mean, previous_mean_) : mean;
  previous_mean_ = mean;
  if (contended && !was_contended_) backoff_down_ = 1;  // a fresh sign: try the smaller team as soon as affordable
  const bool sustained = contended && was_contended_;  // two blocks in a row: a try can beat both
  was_contended_ = contended;
  if (first) return;
  ++blocks_at_level_;
  const bool can_down = level_ + 1 < static_cast<int>(teams_.size());
  // Just moved down: the larger team is tried again two blocks later, whatever the budget, so
  // that a move on a bad moment is undone at once.
  const bool verify = verify_up_ && blocks_at_level_ >= 2;
  if (sustained && can_down && affordable(backoff_down_) && !verify) {
    probe_level_ = level_ + 1;
  } else if (level_ > 0 && (idle_cores_ < 0 || idle_cores_ >= kIdleForLarger) && (verify || affordable(backoff_up_))) {
    verify_up_ = false;
    probe_level_ = level_ - 1;
  } else {
    return;
  }
  probing_ = true;
  probe_seconds_.clear();
}

void TeamChooser::finish_probe() {
  probing_ = false;
  const double cost = std::accumulate(probe_seconds_.begin(), probe_seconds_.end(), 0.0);
  const double mean = (cost - probe_seconds_.front()) / static_cast<double>(probe_seconds_.size() - 1);
  const bool down = probe_level_ > level_;
  if (mean < (down ? kDownMargin : kWinMargin) * reference_) {
    level_ = probe_level_;
    blocks_at_level_ = 0;
    previous_mean_ = 0;
    verify_up_ = down;
    // Back up: the next move down waits longer (a move that was undone at once, or contention
    // that ended); a fresh sign of contention clears it.
    if (down) backoff_up_ = 1;
    else backoff_down_ = std::min(2 * backoff_down_, kMaxBackoff);
  } else {
    int& backoff = down ? backoff_down_ : backoff_up_;
    backoff = std::min(2 * backoff, kMaxBackoff);
  }
  last_probe_cost_ = cost;
  since_probe_ = 0;
  block_passes_ = 0;
  block_seconds_ = 0;
  block_started_ = false;  // the try's CPU time is not the next block's
}

}  // namespace convoy
