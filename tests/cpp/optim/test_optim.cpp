// Schedule, weight-decay grouping, the fused AdamW against torch::optim::AdamW,
// and the sync-free gradient clip against the textbook formula.
#include "config/run_config.h"
#include "helpers.h"
#include "model/gpt.h"
#include "optim/grad_clip.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

using namespace xsagpt;

TEST(Schedule, WarmupPeakMidAndEnd) {
  TrainConfig t;
  t.lr = 1e-3;
  t.min_lr_ratio = 0.1;
  t.warmup_steps = 100;
  t.max_steps = 1100;
  EXPECT_DOUBLE_EQ(learning_rate(t, 0), 1e-3 * 1 / 100);                  // first warmup step
  EXPECT_DOUBLE_EQ(learning_rate(t, 49), 1e-3 * 50 / 100);                // linear
  EXPECT_DOUBLE_EQ(learning_rate(t, 100), 1e-3);                          // peak
  EXPECT_NEAR(learning_rate(t, 600), 1e-4 + 0.5 * (1e-3 - 1e-4), 1e-15);  // half way down the cosine
  EXPECT_NEAR(learning_rate(t, 350), 1e-4 + 0.5 * (1 + std::cos(std::numbers::pi * 0.25)) * 9e-4, 1e-15);
  EXPECT_DOUBLE_EQ(learning_rate(t, 1100), 1e-4);  // min_lr at max_steps
  for (int64_t s = 101; s < 1100; ++s) EXPECT_LE(learning_rate(t, s), learning_rate(t, s - 1));
}

// Warmup-stable-decay written out in float64 from its definition (optim/schedule.h),
// independently of the code's branches: linear warmup, the peak until the decay's first
// step max_steps - round(f max_steps), then min + (peak - min)(1 - sqrt(k / n)) at the
// decay's k-th step of n.
double wsd_reference(double peak, double min_ratio, int64_t warmup, int64_t steps, double f, int64_t step) {
  const int64_t n = static_cast<int64_t>(std::floor(f * static_cast<double>(steps) + 0.5));
  const double min = peak * min_ratio;
  if (step < warmup) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (step >= steps) return min;
  if (step < steps - n) return peak;
  return min + (peak - min) * (1.0 - std::sqrt(static_cast<double>(step - (steps - n)) / static_cast<double>(n)));
}

TEST(Schedule, WsdIsWarmupThenThePeakThenOneMinusSqrtDecay) {
  TrainConfig t;
  t.schedule = Schedule::kWsd;
  t.lr = 3e-3;
  t.min_lr_ratio = 0.05;
  t.warmup_steps = 10;
  for (const auto& [steps, f] : std::vector<std::pair<int64_t, double>>{{100, 0.2}, {37, 0.3}, {1000, 0.99}, {50, 0}}) {
    t.max_steps = steps;
    t.decay_fraction = f;
    int64_t below_peak = 0;
    for (int64_t s = 0; s <= steps + 1; ++s) {
      EXPECT_NEAR(learning_rate(t, s), wsd_reference(3e-3, 0.05, 10, steps, f, s), 1e-18) << steps << " " << s;
      below_peak += s >= 10 && learning_rate(t, s) < 3e-3;
    }
    // Non-trivial: the decay takes as many steps as the fraction says (its first at the peak).
    EXPECT_EQ(below_peak, std::max<int64_t>(0, std::llround(f * steps) - 1) + 2) << steps;
  }
  t.max_steps = 100, t.decay_fraction = 0.2;
  EXPECT_EQ(t.decay_start(), 80);
  EXPECT_DOUBLE_EQ(learning_rate(t, 79), 3e-3);
  EXPECT_DOUBLE_EQ(learning_rate(t, 80), 3e-3);                                  // the decay's first step
  EXPECT_NEAR(learning_rate(t, 85), 1.5e-4 + 2.85e-3 * (1 - 0.5), 1e-18);        // a quarter in: sqrt = 1/2
  EXPECT_DOUBLE_EQ(learning_rate(t, 100), 1.5e-4);                               // min at max_steps
}

// The rates before a wsd run's decay do not depend on its length: a run branched from
// another's stable phase takes the rates it would have taken from scratch.
TEST(Schedule, WsdRatesBeforeTheDecayDoNotDependOnTheLength) {
  TrainConfig a, b;
  a.schedule = b.schedule = Schedule::kWsd;
  a.warmup_steps = b.warmup_steps = 20;
  a.max_steps = 200, b.max_steps = 1000;
  for (int64_t s = 0; s < a.decay_start(); ++s) EXPECT_EQ(learning_rate(a, s), learning_rate(b, s)) << s;
  EXPECT_NE(learning_rate(a, a.decay_start() + 1), learning_rate(b, a.decay_start() + 1));
}

TEST(WeightDecay, OnlyMatricesDecay) {
  auto cfg = test::small_model("xsa");
  cfg.bias = true;
  GPT m(cfg);
  for (const auto& [name, p] : m->unique_named_parameters()) {
    const bool matrix =
        name.ends_with("wte.weight") || name == "lm_head.weight" || name.find("c_attn.weight") != std::string::npos ||
        name.find("c_proj.weight") != std::string::npos || name.find("c_fc.weight") != std::string::npos;
    EXPECT_EQ(decays(p), matrix) << name;
  }
}

namespace {
// Trains a small model for `steps` steps: the first `split` with AdamW `first`,
// then the rest with a fresh AdamW `second` loaded from the first one's state.
std::vector<torch::Tensor> run_adamw(AdamWImpl first, AdamWImpl second, int steps, int split) {
  torch::manual_seed(0);
  auto cfg = test::small_model("xsa");
  cfg.bias = true;
  GPT m(cfg);
  auto opt = std::make_unique<AdamW>(m->unique_named_parameters(), AdamWConfig{0.9, 0.95, 1e-8, 0.1, first});
  EXPECT_EQ(opt->impl(), name(first));
  torch::manual_seed(1);
  for (int s = 0; s < steps; ++s) {
    if (s == split) {
      auto state = opt->state();
      opt = std::make_unique<AdamW>(m->unique_named_parameters(), AdamWConfig{0.9, 0.95, 1e-8, 0.1, second});
      opt->load_state(state);
    }
    auto idx = torch::randint(0, 64, {2, 16}, torch::kLong);
    m->forward(idx, idx).loss.backward();
    opt->step(1e-2 * (s + 1) / steps);
    opt->zero_grad();
  }
  std::vector<torch::Tensor> out;
  for (auto& [n, p] : m->unique_named_parameters()) out.push_back(p.detach().clone());
  return out;
}

// Adam's step is lr * m/(sqrt(v) + eps), of order lr (up to 1e-2 here) whatever the
// gradient's scale, so two implementations' float32 rounding of m/sqrt(v) shows as
// ~1e-6 after 8 steps (measured 1.03e-6 once every parameter gets gradient from step
// 0): the absolute tolerance is 0.1% of one step. A wrong bias correction, beta or
// learning rate moves parameters by 1e-4 or more; decay is checked exactly below.
void expect_same(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(torch::allclose(a[i], b[i], 1e-5, 1e-5))
        << "param " << i << " max diff " << (a[i] - b[i]).abs().max().item<double>();
}
}  // namespace

TEST(AdamW, FusedKernelMatchesTorchOptimAdamW) {
  expect_same(run_adamw(AdamWImpl::kFused, AdamWImpl::kFused, 8, 8),
              run_adamw(AdamWImpl::kTorch, AdamWImpl::kTorch, 8, 8));
}

TEST(AdamW, StateCarriesOverBetweenOptimizersAndImplementations) {
  // Stopping after 4 steps and continuing from the saved state must equal an
  // uninterrupted run: the state is complete and means the same in both layouts.
  const auto straight = run_adamw(AdamWImpl::kFused, AdamWImpl::kFused, 8, 8);
  expect_same(straight, run_adamw(AdamWImpl::kFused, AdamWImpl::kFused, 8, 4));
  expect_same(straight, run_adamw(AdamWImpl::kFused, AdamWImpl::kTorch, 8, 4));
  expect_same(straight, run_adamw(AdamWImpl::kTorch, AdamWImpl::kFused, 8, 4));
}

TEST(AdamW, WeightDecayLeavesNormsAlone) {
  // With zero gradients, only decoupled weight decay moves parameters.
  auto cfg = test::small_model("sa");
  GPT m(cfg);
  AdamW opt(m->unique_named_parameters(), AdamWConfig{0.9, 0.95, 1e-8, 0.5, AdamWImpl::kFused});
  std::map<std::string, torch::Tensor> before;
  for (auto& [n, p] : m->unique_named_parameters()) {
    before[n] = p.detach().clone();
    p.mutable_grad() = torch::zeros_like(p);
  }
  opt.step(0.1);
  for (auto& [n, p] : m->unique_named_parameters()) {
    if (decays(p)) {
      EXPECT_TRUE(torch::allclose(p, before[n] * (1 - 0.1 * 0.5))) << n;
    } else
      EXPECT_TRUE(torch::equal(p, before[n])) << n;
  }
}

TEST(GradClip, MatchesGlobalNormFormula) {
  auto a = torch::randn({3, 4}, torch::requires_grad()), b = torch::randn({5}, torch::requires_grad());
  a.mutable_grad() = torch::randn({3, 4});
  b.mutable_grad() = torch::randn({5});
  const double norm = std::sqrt(a.grad().pow(2).sum().item<double>() + b.grad().pow(2).sum().item<double>());
  auto ga = a.grad().clone(), gb = b.grad().clone();
  auto total = clip_grad_norm({a, b}, norm / 2);
  EXPECT_NEAR(total.item<double>(), norm, 1e-5);
  EXPECT_TRUE(torch::allclose(a.grad(), ga * 0.5, 1e-5));
  EXPECT_TRUE(torch::allclose(b.grad(), gb * 0.5, 1e-5));
  clip_grad_norm({a, b}, norm * 10);  // below the threshold: unchanged
  EXPECT_TRUE(torch::allclose(a.grad(), ga * 0.5, 1e-5));
}
