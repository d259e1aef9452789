// The bootstrap's draws and interval (stats/bootstrap.h).
#include "stats/bootstrap.h"

#include "stats/paired.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace xsagpt {

size_t draw_index(std::mt19937_64& rng, size_t n) {
  const uint64_t top = std::numeric_limits<uint64_t>::max();
  const uint64_t limit = top - top % n;
  uint64_t x = 0;
  do x = rng();
  while (x >= limit);
  return static_cast<size_t>(x % n);
}

void resample(size_t n, int replicates, uint64_t rng_seed,
              const std::function<void(const std::vector<double>& weight)>& replicate) {
  std::mt19937_64 rng(rng_seed);
  std::vector<double> weight(n);
  for (int b = 0; b < replicates; ++b) {
    std::fill(weight.begin(), weight.end(), 0.0);
    for (size_t i = 0; i < n; ++i) weight[draw_index(rng, n)] += 1;
    replicate(weight);
  }
}

double bootstrap_reach(size_t n) {
  const double nn = static_cast<double>(n);
  return t_critical(0.95, static_cast<int64_t>(n) - 1) * std::sqrt(nn / (nn - 1));
}

std::optional<std::pair<double, double>> bootstrap_interval(const std::vector<double>& xs, double estimate, size_t n,
                                                            IntervalScale scale) {
  if (xs.size() < 2) return std::nullopt;
  const bool log = scale == IntervalScale::kLog;
  auto on_scale = [&](double x) { return log ? std::log(x) : x; };
  double mean = 0, squares = 0;
  for (double x : xs) mean += on_scale(x) / static_cast<double>(xs.size());
  for (double x : xs) squares += (on_scale(x) - mean) * (on_scale(x) - mean);
  const double half = bootstrap_reach(n) * std::sqrt(squares / static_cast<double>(xs.size() - 1));
  const double centre = on_scale(estimate);
  if (!log) return std::pair{centre - half, centre + half};
  return std::pair{std::exp(centre - half), std::exp(centre + half)};
}

}  // namespace xsagpt
