// Least-squares lines and the slope's t interval (stats/line_fit.h).
#include "stats/line_fit.h"

#include "stats/paired.h"

#include <cmath>

namespace xsagpt {

std::optional<LineFit> fit_line(const std::vector<double>& x, const std::vector<double>& y, double level) {
  const size_t n = std::min(x.size(), y.size());
  if (n < 2) return std::nullopt;
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) mx += x[i], my += y[i];
  mx /= static_cast<double>(n), my /= static_cast<double>(n);
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < n; ++i) sxx += (x[i] - mx) * (x[i] - mx), sxy += (x[i] - mx) * (y[i] - my);
  if (!(sxx > 0)) return std::nullopt;
  LineFit f;
  f.n = static_cast<int64_t>(n);
  f.slope = sxy / sxx;
  f.intercept = my - f.slope * mx;
  if (n < 3) return f;
  double rss = 0;
  for (size_t i = 0; i < n; ++i) rss += std::pow(y[i] - f.intercept - f.slope * x[i], 2);
  f.se = std::sqrt(rss / static_cast<double>(n - 2) / sxx);
  const double half = t_critical(level, f.n - 2) * *f.se;
  f.ci_low = f.slope - half;
  f.ci_high = f.slope + half;
  return f;
}

}  // namespace xsagpt
