#include "sweep/iso_loss.h"

#include "analysis/paired.h"

#include <algorithm>
#include <cmath>

namespace xsagpt {

namespace {

nlohmann::json number_or_null(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

}  // namespace

std::optional<double> first_reach(const std::vector<double>& xs, const std::vector<double>& loss, double target) {
  for (size_t i = 0; i < xs.size() && i < loss.size(); ++i) {
    if (!(loss[i] <= target)) continue;
    if (i == 0) return xs[0];
    // Between evaluation i-1 (above the target) and i (at or below it).
    return xs[i - 1] + (xs[i] - xs[i - 1]) * (loss[i - 1] - target) / (loss[i - 1] - loss[i]);
  }
  return std::nullopt;
}

void IsoLoss::add(int64_t seed, double target, const std::vector<double>& base_x, const std::vector<double>& base_loss,
                  const std::vector<double>& x, const std::vector<double>& loss) {
  const auto b = first_reach(base_x, base_loss, target);
  const auto v = first_reach(x, loss, target);
  if (!v) {
    not_reached_.push_back({{"seed", seed},
                            {"target", target},
                            {"variant_best", loss.empty() ? nlohmann::json() : nlohmann::json(*std::min_element(
                                                                                  loss.begin(), loss.end()))},
                            {"variant_end", x.empty() ? nlohmann::json() : nlohmann::json(x.back())}});
    return;
  }
  // A curve already at the target at x = 0 (a run that never went below its initial
  // loss) has no ratio.
  if (!b || *b <= 0 || *v <= 0) {
    skipped_.push_back({{"seed", seed},
                        {"why", !b || *b <= 0 ? "the baseline's curve is at its final loss from its first evaluation"
                                              : "the variant's curve is at the target from its first evaluation"}});
    return;
  }
  const double ratio = *v / *b;
  log_ratios_.push_back(std::log(ratio));
  seeds_.push_back(seed);
  per_seed_.push_back({{"seed", seed}, {"target", target}, {"baseline_x", *b}, {"variant_x", *v}, {"ratio", ratio}});
}

nlohmann::json IsoLoss::to_json() const {
  const auto s = paired_stats(log_ratios_);
  nlohmann::json log_ratio = {{"n", s.n},
                              {"mean", s.n > 0 ? nlohmann::json(s.mean) : nlohmann::json()},
                              {"sd", number_or_null(s.sd)},
                              {"df", s.n > 1 ? nlohmann::json(s.n - 1) : nlohmann::json()},
                              {"ci95", s.ci_low ? nlohmann::json::array({*s.ci_low, *s.ci_high}) : nlohmann::json()},
                              {"t", number_or_null(s.t)},
                              {"p", number_or_null(s.p)}};
  return {{"n", s.n},
          {"seeds", seeds_},
          {"multiplier", s.n > 0 ? nlohmann::json(std::exp(s.mean)) : nlohmann::json()},
          {"ci95", s.ci_low ? nlohmann::json::array({std::exp(*s.ci_low), std::exp(*s.ci_high)}) : nlohmann::json()},
          {"p", number_or_null(s.p)},
          {"log_ratio", log_ratio},
          {"per_seed", per_seed_},
          {"not_reached", not_reached_},
          {"skipped", skipped_}};
}

}  // namespace xsagpt
