// Statistics, the bootstrap: resampling n items (a ladder's seeds) with replacement, and
// the 95% interval of a figure read off its replicates.
//
// A replicate draws n of the n items with replacement and hands each item's count to the
// caller as its weight, so that a fit on weighted points is the fit on the resample
// (stats/scaling_fit.h's CurvePoints take such weights). The draws come from
// std::mt19937_64 seeded by the caller, an index by rejection so that every index is
// equally likely and the draws are the same with every standard library
// (uniform_int_distribution's algorithm is the library's): the same inputs give the same
// intervals everywhere.
//
// The interval is the estimate -/+ t_{0.975, n-1} sqrt(n / (n - 1)) standard deviations
// of the replicates, on the figure's own scale or on the log scale (a ratio's: 0.5 and 2
// are as far from 1). Student's factor is what keeps the interval honest with the few
// items ladders have: the plain percentile interval (the replicates' 2.5th and 97.5th
// percentiles) lacks both factors and covered a simulated ladder's true multiplier about
// 0.75 of the time at 3 seeds and 0.83 at 5; this one covered 0.96 and 0.94
// (tests/cpp/sweep/test_ladder_analysis.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <utility>
#include <vector>

namespace xsagpt {

// An index in [0, n), n >= 1, each equally likely.
size_t draw_index(std::mt19937_64& rng, size_t n);

// `replicates` resamples of n items, each handed to `replicate` as the items' weights
// (how many times each was drawn; they sum to n), the draws from std::mt19937_64(rng_seed).
void resample(size_t n, int replicates, uint64_t rng_seed,
              const std::function<void(const std::vector<double>& weight)>& replicate);

// How far the 95% interval reaches on each side of the estimate, in bootstrap standard
// errors, for n >= 2 items: t_{0.975, n - 1} sqrt(n / (n - 1)), the second factor because
// resampling n items spreads a mean by its sample's spread over n, not n - 1.
double bootstrap_reach(size_t n);

enum class IntervalScale { kLinear, kLog };

// The 95% interval (low, high) of a figure from its replicates over n items:
// estimate -/+ bootstrap_reach(n) standard deviations of the replicates, on the scale
// asked (with kLog every replicate and the estimate must be > 0). Empty with fewer than
// two replicates.
std::optional<std::pair<double, double>> bootstrap_interval(const std::vector<double>& replicates, double estimate,
                                                            size_t n, IntervalScale scale);

}  // namespace xsagpt
