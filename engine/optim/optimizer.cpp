#include "engine/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>

#include "engine/core/error.h"

namespace convoy {

Optimizer::Optimizer(const OptimizerConfig& config,
                     std::vector<std::pair<std::string, Parameter*>> params, Backend& backend)
    : config_(config), params_(std::move(params)) {
  for (auto& [name, p] : params_) {
    first_.push_back(backend.zeros(p->value.shape(), DType::f32));
    if (config_.type == "adamw") second_.push_back(backend.zeros(p->value.shape(), DType::f32));
  }
}

void Optimizer::step(Backend& backend, double lr, Tensor* grad_stats) {
  ++steps_;
  update(backend, lr, grad_stats, /*apply=*/true);
}

void Optimizer::check_gradients(Backend& backend, Tensor& grad_stats) {
  update(backend, 0.0, &grad_stats, /*apply=*/false);
}

void Optimizer::update(Backend& backend, double lr, Tensor* grad_stats, bool apply) {
  if (config_.type == "sgd") {
    std::vector<SgdSlot> slots;
    for (size_t i = 0; i < params_.size(); ++i) {
      Parameter* p = params_[i].second;
      slots.push_back({&p->value, &p->grad, &first_[i],
                       p->weight_decay ? static_cast<float>(config_.weight_decay) : 0.0f});
    }
    SgdHyper h{static_cast<float>(lr), static_cast<float>(config_.momentum), config_.nesterov};
    h.grad_stats = grad_stats;
    h.apply = apply;
    backend.ops().sgd_update(slots, h);
  } else {
    std::vector<AdamSlot> slots;
    for (size_t i = 0; i < params_.size(); ++i) {
      Parameter* p = params_[i].second;
      slots.push_back({&p->value, &p->grad, &first_[i], &second_[i],
                       p->weight_decay ? static_cast<float>(config_.weight_decay) : 0.0f});
    }
    AdamHyper h{static_cast<float>(lr), static_cast<float>(config_.beta1), static_cast<float>(config_.beta2),
                static_cast<float>(config_.eps), std::max<int64_t>(1, steps_)};
    h.grad_stats = grad_stats;
    h.apply = apply;
    backend.ops().adamw_update(slots, h);
  }
}

std::vector<NamedTensor> Optimizer::state() {
  std::vector<NamedTensor> out;
  const bool sgd = config_.type == "sgd";
  for (size_t i = 0; i < params_.size(); ++i) {
    out.push_back({"optim." + params_[i].first + (sgd ? ".momentum" : ".exp_avg"), first_[i]});
    if (!sgd) out.push_back({"optim." + params_[i].first + ".exp_avg_sq", second_[i]});
  }
  return out;
}

void Optimizer::load_state(const std::vector<NamedTensor>& tensors, int64_t steps,
                           const std::string& source) {
  std::map<std::string, const Tensor*> by_name;
  for (const auto& t : tensors) by_name[t.name] = &t.tensor;
  for (NamedTensor& slot : state()) {
    auto it = by_name.find(slot.name);
    if (it == by_name.end())
      throw InputError(source + ": optimizer state '" + slot.name + "' is missing (was the run "
                       "trained with another optimizer? start without --resume)");
    if (it->second->shape() != slot.tensor.shape())
      throw InputError(source + ": optimizer state '" + slot.name + "' has shape " +
                       shape_str(it->second->shape()) + ", expected " + shape_str(slot.tensor.shape()));
    slot.tensor.copy_from(*it->second);
  }
  steps_ = steps;
}

double scheduled_lr(const ScheduleConfig& s, double base_lr, int64_t step, int64_t steps_per_epoch,
                    int64_t total_steps) {
  const double epoch = static_cast<double>(step) / static_cast<double>(steps_per_epoch);
  if (s.type == "onecycle") {
    // PyTorch's OneCycleLR (cos annealing, two phases).
    const double initial = base_lr / s.div_factor;
    const double final_lr = initial / s.final_div_factor;
    const double rise_end = s.pct_start * static_cast<double>(total_steps) - 1;
    const double fall_end = static_cast<double>(total_steps) - 1;
    auto cos_anneal = [](double from, double to, double pct) {
      return to + (from - to) / 2.0 * (std::cos(std::numbers::pi * pct) + 1);
    };
    const double t = static_cast<double>(step);
    if (t <= rise_end) return cos_anneal(initial, base_lr, rise_end > 0 ? t / rise_end : 1.0);
    return cos_anneal(base_lr, final_lr, std::min(1.0, (t - rise_end) / std::max(1.0, fall_end - rise_end)));
  }
  const int64_t warmup_steps = static_cast<int64_t>(std::llround(s.warmup_epochs * static_cast<double>(steps_per_epoch)));
  if (step < warmup_steps) {
    const double frac = static_cast<double>(step) / static_cast<double>(warmup_steps);
    return base_lr * (s.warmup_start_factor + (1 - s.warmup_start_factor) * frac);
  }
  if (s.type == "step") {
    double lr = base_lr;
    for (int64_t milestone : s.milestones)
      if (epoch >= static_cast<double>(milestone)) lr *= s.gamma;
    return lr;
  }
  if (s.type == "cosine") {
    const double span = static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
    const double t = static_cast<double>(step - warmup_steps) / span;
    return s.min_lr + (base_lr - s.min_lr) * (1 + std::cos(std::numbers::pi * std::min(1.0, t))) / 2;
  }
  return base_lr;
}

}  // namespace convoy
