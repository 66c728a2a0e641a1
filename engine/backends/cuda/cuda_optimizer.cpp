// CudaOps optimizer updates: every parameter in one fused launch, its slot array uploaded
// only when it changes.
#include "engine/backends/cuda/cuda_ops.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "engine/backends/cuda/cudnn_cublas_check.h"
#include "kernels/optimizer_update.cuh"

namespace convoy::cuda {

void* CudaOps::upload_slots(const std::vector<unsigned char>& bytes) {
  void* before = slots_.get(0);
  void* dev = slots_.get(bytes.size());
  // Same slots as last step: the device copy is current (and a captured graph stays valid).
  if (dev == before && bytes == slots_host_) return dev;
  CONVOY_CUDA_CHECK(cudaMemcpyAsync(dev, bytes.data(), bytes.size(), cudaMemcpyHostToDevice, ctx_.stream));
  slots_host_ = bytes;
  return dev;
}

namespace {
template <class Slot>
std::vector<unsigned char> pack_slots(const std::vector<Slot>& slots, std::vector<int64_t>& block_start) {
  block_start.assign(1, 0);
  for (const Slot& s : slots)
    block_start.push_back(block_start.back() + (s.n + kernels::kOptimChunk - 1) / kernels::kOptimChunk);
  const size_t a = slots.size() * sizeof(Slot), b = block_start.size() * sizeof(int64_t);
  std::vector<unsigned char> bytes(a + b);
  std::memcpy(bytes.data(), slots.data(), a);
  std::memcpy(bytes.data() + a, block_start.data(), b);
  return bytes;
}
}  // namespace

void CudaOps::sgd_update(std::span<const SgdSlot> slots, const SgdHyper& h) {
  check_sgd_update(slots, h, device());
  std::vector<kernels::SgdSlotDev> dev;
  for (const SgdSlot& s : slots) {
    require_supported(OpKind::sgd_update, *s.param);
    const int64_t n = s.param->numel();
    const bool has_buf = s.momentum_buf && s.momentum_buf->defined();
    float* buf = has_buf ? s.momentum_buf->data<float>() : nullptr;
    if (n > 0) dev.push_back({s.param->data<float>(), s.grad->data<float>(), buf, s.weight_decay, n});
  }
  if (dev.empty()) return;
  std::vector<int64_t> block_start;
  const std::vector<unsigned char> bytes = pack_slots(dev, block_start);
  auto* base = static_cast<unsigned char*>(upload_slots(bytes));
  kernels::sgd_update(reinterpret_cast<const kernels::SgdSlotDev*>(base),
                      reinterpret_cast<const int64_t*>(base + dev.size() * sizeof(kernels::SgdSlotDev)),
                      static_cast<int>(dev.size()), block_start.back(), h.lr, h.momentum, h.nesterov,
                      h.grad_stats ? h.grad_stats->data<float>() : nullptr, h.apply, ctx_.stream);
}

void CudaOps::adamw_update(std::span<const AdamSlot> slots, const AdamHyper& h) {
  check_adamw_update(slots, h, device());
  std::vector<kernels::AdamSlotDev> dev;
  for (const AdamSlot& s : slots) {
    require_supported(OpKind::adamw_update, *s.param);
    const int64_t n = s.param->numel();
    if (n > 0)
      dev.push_back({s.param->data<float>(), s.grad->data<float>(), s.m->data<float>(),
                     s.v->data<float>(), s.weight_decay, n});
  }
  if (dev.empty()) return;
  std::vector<int64_t> block_start;
  const std::vector<unsigned char> bytes = pack_slots(dev, block_start);
  auto* base = static_cast<unsigned char*>(upload_slots(bytes));
  const double t = static_cast<double>(h.step);
  const float step_size = static_cast<float>(h.lr / (1.0 - std::pow(static_cast<double>(h.beta1), t)));
  const float inv_sqrt_bc2 =
      static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(static_cast<double>(h.beta2), t)));
  kernels::adamw_update(reinterpret_cast<const kernels::AdamSlotDev*>(base),
                        reinterpret_cast<const int64_t*>(base + dev.size() * sizeof(kernels::AdamSlotDev)),
                        static_cast<int>(dev.size()), block_start.back(), h.lr, h.beta1, h.beta2,
                        h.eps, step_size, inv_sqrt_bc2, h.grad_stats ? h.grad_stats->data<float>() : nullptr,
                        h.apply, ctx_.stream);
}

}  // namespace convoy::cuda
