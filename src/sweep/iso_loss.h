// The iso-loss compute multiplier: how much of the baseline's compute a variant needs
// to reach the baseline's final val loss. Per seed, the tokens (or wall-clock
// seconds) at which the variant's val curve first reaches that loss, divided by those
// at which the baseline's own curve first reached it; below 1 the variant gets there
// sooner. Turning a loss gap into compute makes variants of different sizes
// comparable ("XSA reaches SA's final loss with 0.9x the tokens").
//
// Each curve is read linearly between its evaluations. A seed whose variant never
// reaches the target is named with the best loss it did reach, never extrapolated;
// it is left out of the statistics, which therefore describe the seeds that got
// there. A seed whose baseline never went below its first evaluation (a flat curve,
// or one that ended above its start) or whose variant is at the target from its first
// evaluation has no ratio either: either would divide by, or be, the x of a first
// evaluation, on the time axis the start-up time. That rule reads the losses alone,
// so the token and the time axis name the same seeds.
//
// Over seeds the ratios are paired by seed and summarised on the log scale: the
// multiplier is exp(mean log ratio), the geometric mean, and its 95% interval exp of
// Student's t interval of the mean log ratio (n - 1 degrees of freedom), with p the
// paired t-test of mean log ratio = 0 (stats/paired.h). Logs because a ratio of
// 0.5 and one of 2 should cancel.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace xsagpt {

// The x at which the curve (xs, loss), read linearly between points, first comes
// down to `target`; empty if no point is at or below it.
std::optional<double> first_reach(const std::vector<double>& xs, const std::vector<double>& loss, double target);

// The multiplier of one variant on one axis (tokens or time), a seed at a time.
class IsoLoss {
 public:
  // target: the baseline's final val loss for this seed; the two curves on this axis.
  void add(int64_t seed, double target, const std::vector<double>& base_x, const std::vector<double>& base_loss,
           const std::vector<double>& x, const std::vector<double>& loss);
  // {"n", "seeds", "multiplier", "ci95" ([low, high] of the multiplier), "p",
  //  "log_ratio" (n, mean, sd, df, ci95, t, p of the log ratios),
  //  "per_seed": [{"seed", "target", "baseline_x", "variant_x", "ratio"}],
  //  "not_reached": [{"seed", "target", "variant_best", "variant_end"}],
  //  "skipped": [{"seed", "why"}] (a curve that is at the target from its first evaluation: no ratio)}
  // Every axis given the same seeds and losses names the same seeds in each list.
  nlohmann::json to_json() const;

 private:
  std::vector<double> log_ratios_;
  nlohmann::json seeds_ = nlohmann::json::array(), per_seed_ = nlohmann::json::array(),
                 not_reached_ = nlohmann::json::array(), skipped_ = nlohmann::json::array();
};

}  // namespace xsagpt
