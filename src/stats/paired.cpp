// Student's t from its closed form for integer degrees of freedom (stats/paired.h).
#include "stats/paired.h"

#include "util/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace xsagpt {

double t_central_probability(double t, int64_t df) {
  if (df < 1) throw ConfigError(fmt::format("t distribution: degrees of freedom must be >= 1, got {}", df));
  if (std::isinf(t)) return 1.0;
  t = std::fabs(t);
  const double nu = static_cast<double>(df);
  const double r = std::sqrt(nu + t * t);
  const double c = std::sqrt(nu) / r, s = t / r, c2 = c * c;  // cos and sin of theta = atan(t / sqrt(df))
  if (df % 2 == 1) {
    // A&S 26.7.3: (2/pi) (theta + sin(theta) (cos + 2/3 cos^3 + ... + (2*4..(df-3))/(1*3..(df-2)) cos^(df-2)))
    double sum = 0, term = c;
    if (df > 1) {
      sum = c;
      for (int64_t k = 3; k <= df - 2; k += 2) {
        term *= c2 * static_cast<double>(k - 1) / static_cast<double>(k);
        sum += term;
      }
    }
    return std::min(1.0, 2.0 / std::numbers::pi * (std::atan2(t, std::sqrt(nu)) + s * sum));  // no rounding past 1
  }
  // A&S 26.7.4: sin(theta) (1 + 1/2 cos^2 + (1*3)/(2*4) cos^4 + ... + (1*3..(df-3))/(2*4..(df-2)) cos^(df-2))
  double sum = 1, term = 1;
  for (int64_t k = 2; k <= df - 2; k += 2) {
    term *= c2 * static_cast<double>(k - 1) / static_cast<double>(k);
    sum += term;
  }
  return std::min(1.0, s * sum);
}

double t_two_sided_p(double t, int64_t df) { return std::max(0.0, 1.0 - t_central_probability(t, df)); }

double t_critical(double level, int64_t df) {
  if (!(level > 0 && level < 1)) throw ConfigError(fmt::format("t quantile: level must be in (0, 1), got {}", level));
  double lo = 0, hi = 1;
  while (t_central_probability(hi, df) < level) hi *= 2;  // A rises to 1: this ends
  // A is increasing in t: bisect to the last bit (about 60 halvings from [0, 2^k]).
  for (int i = 0; i < 200 && hi - lo > 1e-15 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (t_central_probability(mid, df) < level ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

PairedStats paired_stats(const std::vector<double>& d, double level) {
  PairedStats s;
  s.n = static_cast<int64_t>(d.size());
  if (d.empty()) return s;
  double sum = 0;
  for (double x : d) sum += x;
  s.mean = sum / static_cast<double>(s.n);
  if (s.n < 2) return s;
  double ss = 0;
  for (double x : d) ss += (x - s.mean) * (x - s.mean);
  s.sd = std::sqrt(ss / static_cast<double>(s.n - 1));
  const double se = *s.sd / std::sqrt(static_cast<double>(s.n));
  const double half = t_critical(level, s.n - 1) * se;
  s.ci_low = s.mean - half;
  s.ci_high = s.mean + half;
  if (se > 0) {
    s.t = s.mean / se;
    s.p = t_two_sided_p(*s.t, s.n - 1);
  }
  return s;
}

}  // namespace xsagpt
