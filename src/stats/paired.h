// Paired comparisons over seeds: Student's t for the mean of per-seed differences
// (variant minus baseline, same seed: same initial weights and data order), its
// two-sided 95% confidence interval and the paired t-test's two-sided p-value, as
// scipy.stats.ttest_rel and scipy.stats.t.interval give them.
//
// Why written here: none of the chosen dependencies has a t distribution (LibTorch
// has no incomplete beta function; Debian's Boost 1.74 Math is not standalone, and its
// headers cannot travel to the GPU machines, whose carry limit is 64 MiB). Paired seeds
// always give an integer number of degrees of freedom, for which the t CDF has an exact
// finite closed form (Abramowitz & Stegun 26.7.3 for odd df, 26.7.4 for even df); the
// quantile is found by bisection on that CDF. tests/python/sweep/test_paired_stats.py checks
// both against scipy.stats over df 1..30 and 100.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace xsagpt {

// A(t | df) = P(|T| <= t) for Student's t with df >= 1 degrees of freedom; t >= 0.
double t_central_probability(double t, int64_t df);

// The two-sided p-value P(|T| >= |t|).
double t_two_sided_p(double t, int64_t df);

// The t with P(|T| <= t) = level (0 < level < 1): the half-width factor of a
// two-sided confidence interval at that level (12.706 for df 1 at 0.95).
double t_critical(double level, int64_t df);

// The paired t statistics of a list of differences. With fewer than two, no spread,
// interval or test exists: sd, ci and p stay empty. With two or more equal
// differences the spread is zero: the interval is the point, and t and p are empty
// (scipy gives nan there).
struct PairedStats {
  int64_t n = 0;
  double mean = 0;
  std::optional<double> sd;               // sample standard deviation of the differences
  std::optional<double> ci_low, ci_high;  // 95% t interval of the mean difference
  std::optional<double> t, p;             // the paired t-test, two-sided
};
PairedStats paired_stats(const std::vector<double>& differences, double level = 0.95);

}  // namespace xsagpt
