// A straight line by ordinary least squares, y = intercept + slope x, with the slope's
// two-sided confidence interval from Student's t on n - 2 degrees of freedom (the
// residuals' spread), as scipy.stats.linregress's slope and stderr give it. The sweep
// uses it for trends: how a variant's paired difference moves along a numeric grid key
// (sweep/dial_trend.h), and how a ladder's compute multiplier moves with compute
// (sweep/ladder_analysis.h, the slope alone).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace xsagpt {

struct LineFit {
  int64_t n = 0;
  double slope = 0, intercept = 0;
  std::optional<double> se;               // the slope's standard error; from 3 points on
  std::optional<double> ci_low, ci_high;  // its interval at the level asked; from 3 points on
};

// Empty when x holds fewer than two distinct values (no slope exists). With two points
// the line passes through both: a slope, no interval. With no residual the interval is
// the slope itself.
std::optional<LineFit> fit_line(const std::vector<double>& x, const std::vector<double>& y, double level = 0.95);

}  // namespace xsagpt
