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

void TeamChooser::record(double seconds, const std::function<int64_t()>& preemptions) {
  seconds = std::max(0.0, seconds);
  if (probing_) {
    probe_seconds_.push_back(seconds);
    const double counted = std::accumulate(probe_seconds_.begin() + 1, probe_seconds_.end(), 0.0);
    if (static_cast<int>(probe_seconds_.size()) >= kProbePasses && counted >= kBlockSeconds) finish_probe();
    return;
  }
  if (block_start_preemptions_ < 0) block_start_preemptions_ = preemptions ? preemptions() : 0;
  block_min_ = block_passes_ == 0 ? seconds : std::min(block_min_, seconds);
  ++block_passes_;
  block_seconds_ += seconds;
  since_probe_ += seconds;
  if (block_passes_ >= kBlockPasses && block_seconds_ >= kBlockSeconds) close_block(preemptions);
}

bool TeamChooser::affordable(int backoff) const {
  const double cost = last_probe_cost_ > 0 ? last_probe_cost_ : kProbePasses * reference_;
  return since_probe_ >= backoff * cost / kProbeBudget;
}

void TeamChooser::close_block(const std::function<int64_t()>& preemptions) {
  const double mean = block_seconds_ / block_passes_;
  const int64_t now = preemptions ? preemptions() : 0;
  const double preempted = static_cast<double>(std::max<int64_t>(0, now - block_start_preemptions_));
  const bool contended = (blocks_++ > 0 && mean > kVaried * block_min_) ||
                         (preempted >= 2 && preempted > kPreemptionsPerSecond * block_seconds_);
  block_passes_ = 0;
  block_seconds_ = 0;
  block_start_preemptions_ = now;
  reference_ = mean;
  if (contended && !was_contended_) backoff_down_ = 1;  // a fresh sign: try the smaller team as soon as affordable
  was_contended_ = contended;
  const bool can_down = level_ + 1 < static_cast<int>(teams_.size());
  if (contended && can_down && affordable(backoff_down_)) {
    probe_level_ = level_ + 1;
  } else if (level_ > 0 && affordable(backoff_up_)) {
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
  if (mean < kWinMargin * reference_) {
    level_ = probe_level_;
    backoff_down_ = backoff_up_ = 1;
  } else {
    int& backoff = down ? backoff_down_ : backoff_up_;
    backoff = std::min(2 * backoff, kMaxBackoff);
  }
  last_probe_cost_ = cost;
  since_probe_ = 0;
  block_passes_ = 0;
  block_seconds_ = 0;
  block_start_preemptions_ = -1;  // the try's preemptions are not the next block's
}

}  // namespace convoy
