#include "engine/ops/optimizer_update.h"

#include "engine/ops/op_check.h"

namespace convoy {

void check_sgd_update(std::span<const SgdSlot> slots, const SgdHyper& h, Device device) {
  const OpCheck c("sgd_update", device);
  if (h.grad_stats) c.f32(*h.grad_stats, 2, "grad_stats");
  for (const SgdSlot& s : slots) {
    c.that(s.param && s.grad, "a slot without param or grad");
    const int64_t n = s.param->numel();
    c.f32(*s.param, n, "param").f32(*s.grad, n, "grad");
    const bool has_buf = s.momentum_buf && s.momentum_buf->defined();
    c.that(has_buf || h.momentum == 0.f, "momentum needs a momentum buffer");
    if (has_buf) c.f32(*s.momentum_buf, n, "momentum_buf");
  }
}

void check_adamw_update(std::span<const AdamSlot> slots, const AdamHyper& h, Device device) {
  const OpCheck c("adamw_update", device);
  c.that(h.step >= 1, "step must be at least 1");
  if (h.grad_stats) c.f32(*h.grad_stats, 2, "grad_stats");
  for (const AdamSlot& s : slots) {
    c.that(s.param && s.grad && s.m && s.v, "a slot without param, grad, m or v");
    const int64_t n = s.param->numel();
    c.f32(*s.param, n, "param").f32(*s.grad, n, "grad").f32(*s.m, n, "m").f32(*s.v, n, "v");
  }
}

}  // namespace convoy
