// The fused optimizer updates as OpenMP loops: SGD and AdamW over all parameters in one
// parallel region.
#include <cmath>

#include "engine/backends/cpu/cpu_loops.h"
#include "engine/backends/cpu/cpu_ops.h"

namespace convoy::cpu {

namespace {
// A thread's share of the gradient statistics (SgdHyper::grad_stats), summed in double.
struct GradTally {
  double bad = 0, sumsq = 0;
  void add(float g) {
    if (std::isfinite(g)) sumsq += static_cast<double>(g) * g;
    else bad += 1;
  }
  // Into stats[0..1]; called by every thread of the team once its loops are done.
  void flush(float* stats) const {
#pragma omp critical(convoy_grad_stats)
    {
      stats[0] += static_cast<float>(bad);
      stats[1] += static_cast<float>(sumsq);
    }
  }
};
}  // namespace

void CpuOps::sgd_update(std::span<const SgdSlot> slots, const SgdHyper& h) {
  // The shared check holds every backend to f32 master weights, so supports() adds nothing.
  check_sgd_update(slots, h, Device::cpu());
  int64_t total = 0;
  for (const SgdSlot& s : slots) total += s.param->numel();
  const int nt = team(threads_);
  const float lr = h.lr, mu = h.momentum;
  const bool nesterov = h.nesterov, apply = h.apply;
  float* stats = h.grad_stats ? h.grad_stats->data<float>() : nullptr;
#pragma omp parallel num_threads(nt) if (total >= kParallelMin)
  {
  GradTally tally;
  for (const SgdSlot& s : slots) {
    float* p = s.param->data<float>();
    const float* g = s.grad->data<float>();
    float* buf = s.momentum_buf && s.momentum_buf->defined() ? s.momentum_buf->data<float>()
                                                             : nullptr;
    const float wd = s.weight_decay;
    const int64_t n = s.param->numel();
#pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < n; ++i) {
      if (stats) tally.add(g[i]);
      if (!apply) continue;
      float d = g[i] + wd * p[i];
      if (buf) {
        const float b = mu * buf[i] + d;
        buf[i] = b;
        d = nesterov ? d + mu * b : b;
      }
      p[i] -= lr * d;
    }
  }
  if (stats) tally.flush(stats);
  }
}

void CpuOps::adamw_update(std::span<const AdamSlot> slots, const AdamHyper& h) {
  check_adamw_update(slots, h, Device::cpu());  // f32 master weights, as for SGD
  int64_t total = 0;
  for (const AdamSlot& s : slots) total += s.param->numel();
  const int nt = team(threads_);
  const double t = static_cast<double>(h.step);
  const float b1 = h.beta1, b2 = h.beta2, eps = h.eps;
  const float step_size = static_cast<float>(h.lr / (1.0 - std::pow(static_cast<double>(b1), t)));
  const float inv_sqrt_bc2 =
      static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(static_cast<double>(b2), t)));
  const bool apply = h.apply;
  float* stats = h.grad_stats ? h.grad_stats->data<float>() : nullptr;
#pragma omp parallel num_threads(nt) if (total >= kParallelMin)
  {
  GradTally tally;
  for (const AdamSlot& s : slots) {
    float* p = s.param->data<float>();
    const float* g = s.grad->data<float>();
    float* m = s.m->data<float>();
    float* v = s.v->data<float>();
    const float decay = 1.0f - h.lr * s.weight_decay;
    const int64_t n = s.param->numel();
#pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < n; ++i) {
      const float gi = g[i];
      if (stats) tally.add(gi);
      if (!apply) continue;
      const float mi = b1 * m[i] + (1.0f - b1) * gi;
      const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
      m[i] = mi;
      v[i] = vi;
      p[i] = p[i] * decay - step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps);
    }
  }
  if (stats) tally.flush(stats);
  }
}

}  // namespace convoy::cpu
