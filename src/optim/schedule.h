// Learning-rate schedules, each a pure function of the step and the run config, so a
// resumed run takes exactly the rates an uninterrupted one would. Both start with a
// linear warmup from 0 to the peak rate over warmup_steps and end at
// min_lr_ratio * peak at max_steps:
//   "cosine" (the paper's): cosine decay over every step after the warmup;
//   "wsd" (warmup-stable-decay): the peak rate until decay_start(), then a decay over
//     the last decay_fraction of the run shaped 1 - sqrt(progress). Hägele et al. 2024
//     ("Scaling Laws and Compute-Optimal Training Beyond Fixed Training Durations",
//     arXiv 2405.18392) found that 1-sqrt cooldown ends lower than a linear one and that
//     a 20% cooldown matches a cosine run of the same length. The rate before the decay
//     does not depend on max_steps, which is what lets one run at the stable rate be
//     branched into decays of several lengths (a ladder's data ratios, sweep/branch.h).
// With train.optimizer=muon the same curve, scaled to train.muon_lr, drives Muon.
#pragma once

#include "config/run_config.h"

#include <cmath>
#include <numbers>

namespace xsagpt {

// `step` counts optimizer steps from 0; returns the rate used for that step.
inline double learning_rate(const TrainConfig& t, int64_t step) {
  const double min_lr = t.lr * t.min_lr_ratio;
  if (step < t.warmup_steps) return t.lr * static_cast<double>(step + 1) / static_cast<double>(t.warmup_steps);
  if (step >= t.max_steps) return min_lr;
  if (t.schedule == Schedule::kWsd) {
    const int64_t start = t.decay_start();
    if (step < start) return t.lr;
    const double progress = static_cast<double>(step - start) / static_cast<double>(t.max_steps - start);
    return min_lr + (1.0 - std::sqrt(progress)) * (t.lr - min_lr);
  }
  const double decay_steps = static_cast<double>(std::max<int64_t>(1, t.max_steps - t.warmup_steps));
  const double progress = static_cast<double>(step - t.warmup_steps) / decay_steps;
  return min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * progress)) * (t.lr - min_lr);
}

// Muon's rate at the step whose scheduled rate is lr: the same schedule, scaled to muon_lr.
inline double muon_learning_rate(const TrainConfig& t, double lr) { return lr * t.muon_lr / t.lr; }

}  // namespace xsagpt
