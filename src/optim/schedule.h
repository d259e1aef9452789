// Learning-rate schedule of the paper: linear warmup from 0 to the peak rate
// over warmup_steps, then cosine decay to min_lr_ratio * peak at max_steps. With
// train.optimizer=muon the same curve, scaled to train.muon_lr, drives Muon.
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
  const double decay_steps = static_cast<double>(std::max<int64_t>(1, t.max_steps - t.warmup_steps));
  const double progress = static_cast<double>(step - t.warmup_steps) / decay_steps;
  return min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * progress)) * (t.lr - min_lr);
}

// Muon's rate at the step whose scheduled rate is lr: the same schedule, scaled to muon_lr.
inline double muon_learning_rate(const TrainConfig& t, double lr) { return lr * t.muon_lr / t.lr; }

}  // namespace xsagpt
