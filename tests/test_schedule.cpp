// Learning-rate schedules and the Optimizer's state, against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "engine/core/error.h"
#include "engine/optim/optimizer.h"

namespace convoy {
namespace {

TEST(Schedule, ConstantAndWarmup) {
  ScheduleConfig s;
  EXPECT_DOUBLE_EQ(scheduled_lr(s, 0.1, 0, 10, 100), 0.1);
  EXPECT_DOUBLE_EQ(scheduled_lr(s, 0.1, 99, 10, 100), 0.1);
  s.warmup_epochs = 1;  // 10 steps, from 0.1 * lr
  EXPECT_DOUBLE_EQ(scheduled_lr(s, 0.1, 0, 10, 100), 0.01);
  EXPECT_NEAR(scheduled_lr(s, 0.1, 5, 10, 100), 0.01 + 0.09 * 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(scheduled_lr(s, 0.1, 10, 10, 100), 0.1);
}

TEST(Schedule, StepDecaysAtMilestones) {
  ScheduleConfig s;
  s.type = "step";
  s.milestones = {2, 4};
  s.gamma = 0.1;
  EXPECT_DOUBLE_EQ(scheduled_lr(s, 1.0, 19, 10, 60), 1.0);
  EXPECT_NEAR(scheduled_lr(s, 1.0, 20, 10, 60), 0.1, 1e-12);
  EXPECT_NEAR(scheduled_lr(s, 1.0, 45, 10, 60), 0.01, 1e-12);
}

TEST(Schedule, CosineFromLrToMinAfterWarmup) {
  ScheduleConfig s;
  s.type = "cosine";
  s.min_lr = 0.001;
  EXPECT_DOUBLE_EQ(scheduled_lr(s, 0.1, 0, 10, 100), 0.1);
  EXPECT_NEAR(scheduled_lr(s, 0.1, 50, 10, 100), 0.001 + 0.099 * 0.5, 1e-12);
  EXPECT_NEAR(scheduled_lr(s, 0.1, 25, 10, 100), 0.001 + 0.099 * (1 + std::cos(std::numbers::pi / 4)) / 2, 1e-12);
  EXPECT_NEAR(scheduled_lr(s, 0.1, 100, 10, 100), 0.001, 1e-12);
  s.warmup_epochs = 2;  // 20 steps of warm-up, then cosine over the remaining 80
  EXPECT_DOUBLE_EQ(scheduled_lr(s, 0.1, 20, 10, 100), 0.1);
  EXPECT_NEAR(scheduled_lr(s, 0.1, 60, 10, 100), 0.001 + 0.099 * 0.5, 1e-12);
}

TEST(Schedule, OneCycleMatchesPyTorch) {
  // torch.optim.lr_scheduler.OneCycleLR(max_lr=1, total_steps=100, pct_start=0.3) gives
  // lr 0.04 at step 0, 1.0 at step 29 and 4e-6 at step 99 (div 25, final div 1e4).
  ScheduleConfig s;
  s.type = "onecycle";
  EXPECT_NEAR(scheduled_lr(s, 1.0, 0, 10, 100), 0.04, 1e-12);
  EXPECT_NEAR(scheduled_lr(s, 1.0, 29, 10, 100), 1.0, 1e-12);
  EXPECT_NEAR(scheduled_lr(s, 1.0, 99, 10, 100), 0.04 / 1e4, 1e-12);
  // Midway up: cos annealing from 0.04 to 1 at pct 14.5/29 = 0.5.
  EXPECT_NEAR(scheduled_lr(s, 1.0, 14, 10, 100), 1.0 + (0.04 - 1.0) / 2 * (std::cos(std::numbers::pi * 14 / 29.0) + 1), 1e-12);
}

Parameter make_param(std::vector<float> value, std::vector<float> grad) {
  Parameter p;
  p.name = "w";
  const int64_t n = static_cast<int64_t>(value.size());
  p.value = Tensor::from_floats(value, {n});
  p.grad = Tensor::from_floats(grad, {n});
  return p;
}

TEST(Optimizer, SgdNesterovTwoStepsByHand) {
  auto backend = make_cpu_backend({});
  Parameter p = make_param({1.0f, -2.0f}, {0.5f, 0.25f});
  OptimizerConfig c;
  c.lr = 0.1, c.momentum = 0.9, c.nesterov = true, c.weight_decay = 0.01;
  Optimizer opt(c, {{"layer.w", &p}}, *backend);
  opt.step(*backend, 0.1);
  // g = 0.5 + 0.01 * 1 = 0.51; buf = 0.51; update = g + 0.9 buf = 0.969.
  double w0 = 1.0 - 0.1 * 0.969;
  EXPECT_NEAR(p.value.to_floats()[0], w0, 1e-6);
  opt.step(*backend, 0.1);
  const double g = 0.5 + 0.01 * w0, buf = 0.9 * 0.51 + g;
  EXPECT_NEAR(p.value.to_floats()[0], w0 - 0.1 * (g + 0.9 * buf), 1e-6);
  EXPECT_EQ(opt.steps(), 2);
}

TEST(Optimizer, AdamWFirstStepMovesByLr) {
  auto backend = make_cpu_backend({});
  Parameter p = make_param({1.0f, -1.0f}, {0.3f, -7.0f});
  OptimizerConfig c;
  c.type = "adamw", c.weight_decay = 0.1;
  Optimizer opt(c, {{"w", &p}}, *backend);
  opt.step(*backend, 0.01);
  // Step 1: m_hat = g, v_hat = g^2, so the step is lr * sign(g) (up to eps), after decay.
  EXPECT_NEAR(p.value.to_floats()[0], 1.0 * (1 - 0.001) - 0.01, 1e-6);
  EXPECT_NEAR(p.value.to_floats()[1], -1.0 * (1 - 0.001) + 0.01, 1e-6);
}

TEST(Optimizer, StateRoundTripAndMissingStateIsNamed) {
  auto backend = make_cpu_backend({});
  Parameter p = make_param({1.0f}, {1.0f});
  OptimizerConfig c;
  Optimizer a(c, {{"w", &p}}, *backend);
  a.step(*backend, 0.1);
  std::vector<NamedTensor> saved;
  for (auto& t : a.state()) saved.push_back({t.name, t.tensor.clone()});
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].name, "optim.w.momentum");
  Parameter q = make_param({1.0f}, {1.0f});
  Optimizer b(c, {{"w", &q}}, *backend);
  b.load_state(saved, 1, "ckpt");
  EXPECT_EQ(b.state()[0].tensor.to_floats(), saved[0].tensor.to_floats());
  EXPECT_EQ(b.steps(), 1);
  OptimizerConfig adam;
  adam.type = "adamw";
  Optimizer d(adam, {{"w", &q}}, *backend);
  EXPECT_THROW(d.load_state(saved, 1, "ckpt"), InputError);
}

}  // namespace
}  // namespace convoy
