// The iso-loss compute multiplier, seed by seed and over seeds (see iso_loss.h).
#include "sweep/iso_loss.h"

#include "stats/paired.h"

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
  // Whether a seed has a ratio is decided on the losses alone, so that both axes take
  // the same seeds: on the time axis the first evaluation lies at the run's start-up
  // time, not at 0, and a rule on x would give a ratio of two start-up times there
  // for a seed the token axis refuses.
  auto skip = [&](const char* why) { skipped_.push_back({{"seed", seed}, {"why", why}}); };
  if (base_loss.empty() || base_loss.front() <= target)
    return skip("the baseline's curve is at its final loss from its first evaluation (it never went below its start)");
  const auto v = first_reach(x, loss, target);
  if (!v) {
    not_reached_.push_back(
        {{"seed", seed},
         {"target", target},
         {"variant_best",
          loss.empty() ? nlohmann::json() : nlohmann::json(*std::min_element(loss.begin(), loss.end()))},
         {"variant_end", x.empty() ? nlohmann::json() : nlohmann::json(x.back())}});
    return;
  }
  if (loss.front() <= target) return skip("the variant's curve is at the target from its first evaluation");
  const auto b = first_reach(base_x, base_loss, target);
  if (!b) return skip("the baseline's curve does not come down to its own final loss");
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
