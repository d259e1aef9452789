// The power-law fit L(C) = E + A C^-alpha (stats/scaling_fit.h).
#include "stats/scaling_fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace xsagpt {

namespace {

constexpr double kAlphaLow = 1e-4, kAlphaHigh = 10;
constexpr int kAlphaGrid = 61, kSharedEGrid = 41;
constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The least of f over [lo, hi]: a grid of n points finds the best cell, golden-section
// search refines within the cells either side of it. at_low / at_high: the least value
// lies within tol of that end of the range (no interior minimum was found there).
struct Minimum {
  double x = 0, value = kInfinity;
  bool at_low = false, at_high = false;
};

template <class F>
Minimum grid_then_golden(const F& f, double lo, double hi, int n, double tol) {
  auto x_of = [&](int i) { return lo + (hi - lo) * i / (n - 1); };
  Minimum best;
  int at = 0;
  for (int i = 0; i < n; ++i) {
    const double v = f(x_of(i));
    if (v < best.value) {
      best = {x_of(i), v};
      at = i;
    }
  }
  if (!std::isfinite(best.value)) return best;
  double a = x_of(std::max(at - 1, 0)), b = x_of(std::min(at + 1, n - 1));
  const double g = (std::sqrt(5.0) - 1) / 2;
  double c = b - g * (b - a), d = a + g * (b - a), fc = f(c), fd = f(d);
  while (b - a > tol) {
    if (fc < fd) {
      b = d, d = c, fd = fc, c = b - g * (b - a), fc = f(c);
    } else {
      a = c, c = d, fc = fd, d = a + g * (b - a), fd = f(d);
    }
  }
  for (const auto& [x, v] : {std::pair{c, fc}, std::pair{d, fd}})
    if (v < best.value) best.x = x, best.value = v;
  best.at_low = best.x - lo <= tol;
  best.at_high = hi - best.x <= tol;
  return best;
}

// A curve's groups with compute measured from a reference (the geometric mean of its
// computes), so that x^-alpha stays near 1 whatever the FLOPs' magnitude.
struct Scaled {
  std::vector<double> log_x, w, m;
  double log_ref = 0, within = 0;
  mutable std::vector<double> f;  // x^-alpha at the alpha being tried: one buffer for the many tries
};

Scaled scaled_curve(const CurvePoints& c) {
  Scaled s;
  for (const auto& g : c.groups()) s.log_ref += std::log(g.compute) / static_cast<double>(c.groups().size());
  for (const auto& g : c.groups()) {
    s.log_x.push_back(std::log(g.compute) - s.log_ref);
    s.w.push_back(g.weight);
    s.m.push_back(g.mean());
  }
  s.within = c.within_ss();
  return s;
}

// E and A (at the reference compute) by least squares at one alpha, and the squared
// residual of the means (weighted by their counts). E free is kept >= 0: where the
// normal equations give E < 0 the constrained least squares is on E = 0.
struct LinearPart {
  double E = 0, A = 0, sse = 0;
};

LinearPart linear_part(const Scaled& s, double alpha, std::optional<double> fixed_e) {
  auto& f = s.f;
  f.resize(s.log_x.size());
  double sw = 0, sf = 0, sff = 0, sm = 0, sfm = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    f[i] = std::exp(-alpha * s.log_x[i]);
    sw += s.w[i], sf += s.w[i] * f[i], sff += s.w[i] * f[i] * f[i], sm += s.w[i] * s.m[i];
    sfm += s.w[i] * f[i] * s.m[i];
  }
  LinearPart p;
  const double det = sw * sff - sf * sf;
  if (!fixed_e && det > 1e-12 * sw * sff) {
    p.A = (sw * sfm - sf * sm) / det;
    p.E = (sm - p.A * sf) / sw;
  } else if (!fixed_e) {
    p.E = sm / sw;  // alpha so small that x^-alpha is one constant: the curve is flat
  }
  if (fixed_e || p.E < 0) {
    p.E = fixed_e.value_or(0.0);
    p.A = (sfm - p.E * sf) / sff;
  }
  for (size_t i = 0; i < f.size(); ++i) {
    const double r = s.m[i] - p.E - p.A * f[i];
    p.sse += s.w[i] * r * r;
  }
  return p;
}

// The best alpha for E free or given: the search over log alpha, then the fit's checks.
PowerLawFit fit_scaled(const Scaled& s, std::optional<double> fixed_e) {
  PowerLawFit fit;
  for (double w : s.w) fit.points += w;
  auto sse = [&](double log_alpha) { return linear_part(s, std::exp(log_alpha), fixed_e).sse; };
  const auto m = grid_then_golden(sse, std::log(kAlphaLow), std::log(kAlphaHigh), kAlphaGrid, 1e-10);
  if (!std::isfinite(m.value)) {
    fit.why = "the residual is not a finite number";
    return fit;
  }
  if (m.at_low || m.at_high) {
    fit.why = fmt::format("alpha runs to the edge of [{:g}, {:g}]: the losses follow no power law falling with compute",
                          kAlphaLow, kAlphaHigh);
    return fit;
  }
  const double alpha = std::exp(m.x);
  const auto p = linear_part(s, alpha, fixed_e);
  fit.sse = p.sse + s.within;
  if (!(p.A > 0)) {
    fit.why = "the loss does not fall with compute (A <= 0)";
    return fit;
  }
  fit.law = PowerLaw{p.E, p.A * std::exp(alpha * s.log_ref), alpha};  // A x^-alpha = A ref^alpha C^-alpha
  return fit;
}

}  // namespace

void CurvePoints::add(double compute, double loss, double weight) {
  if (weight <= 0) return;
  auto g = std::find_if(groups_.begin(), groups_.end(), [&](const Group& x) { return x.compute == compute; });
  if (g == groups_.end()) g = groups_.insert(groups_.end(), Group{compute});
  g->weight += weight;
  g->sum += weight * loss;
  g->sum_sq += weight * loss * loss;
}

double CurvePoints::points() const {
  double n = 0;
  for (const auto& g : groups_) n += g.weight;
  return n;
}

double CurvePoints::within_ss() const {
  double ss = 0;
  for (const auto& g : groups_) ss += std::max(0.0, g.sum_sq - g.sum * g.sum / g.weight);
  return ss;
}

double CurvePoints::lowest_mean() const {
  double low = kInfinity;
  for (const auto& g : groups_) low = std::min(low, g.mean());
  return low;
}

double PowerLaw::loss(double compute) const { return E + std::exp(std::log(A) - alpha * std::log(compute)); }

std::optional<double> PowerLaw::compute_at(double target) const {
  if (!(target > E)) return std::nullopt;
  return std::exp((std::log(A) - std::log(target - E)) / alpha);
}

double PowerLawFit::rmse() const { return points > 0 ? std::sqrt(sse / points) : 0.0; }

PowerLawFit fit_power_law(const CurvePoints& c, std::optional<double> fixed_e) {
  const size_t need = fixed_e ? 2 : 3;
  if (c.groups().size() < need) {
    PowerLawFit fit;
    fit.points = c.points();
    fit.why = fmt::format("{} distinct computes needed to fit {}, {} here", need,
                          fixed_e ? "A and alpha" : "E, A and alpha", c.groups().size());
    return fit;
  }
  return fit_scaled(scaled_curve(c), fixed_e);
}

std::vector<PowerLawFit> fit_shared_e(const std::vector<CurvePoints>& curves) {
  std::vector<PowerLawFit> fits(curves.size());
  auto fail_all = [&](const std::string& why) {
    for (size_t i = 0; i < curves.size(); ++i) fits[i] = PowerLawFit{std::nullopt, why, curves[i].points(), 0};
    return fits;
  };
  std::vector<Scaled> s;
  double high = kInfinity;
  for (const auto& c : curves) {
    if (c.groups().size() < 2)
      return fail_all(
          fmt::format("a shared E needs 2 distinct computes on every curve, one has {}", c.groups().size()));
    s.push_back(scaled_curve(c));
    high = std::min(high, c.lowest_mean());
  }
  if (s.empty() || !(high > 0)) return fail_all("a shared E needs curves with positive losses");
  // For one E each curve's alpha is its own search; the profile is the sum of their least residuals.
  auto profile = [&](double e) {
    double total = 0;
    for (const auto& c : s) {
      const auto f = fit_scaled(c, e);
      if (!f.law) return kInfinity;
      total += f.sse;
    }
    return total;
  };
  const auto m = grid_then_golden(profile, 0.0, high, kSharedEGrid, 1e-10 * high);
  if (!std::isfinite(m.value)) return fail_all("no shared E in [0, the lowest mean loss) fits every curve");
  if (m.at_high) return fail_all("the shared E runs into the lowest mean loss: the curves do not level off");
  for (size_t i = 0; i < s.size(); ++i) fits[i] = fit_scaled(s[i], m.at_low ? 0.0 : m.x);
  return fits;
}

}  // namespace xsagpt
