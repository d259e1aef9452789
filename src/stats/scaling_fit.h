// Ladders, the power-law fit: L(C) = E + A C^-alpha by least squares on every (compute,
// loss) point of a curve, with E fitted, E given (0), or one E shared by several curves.
// The ladder analysis (sweep/ladder_analysis.h) reads compute multipliers off these
// curves.
//
// How: for a fixed alpha the model is linear in E and A, so they come from the 2x2 (E
// fitted) or 1x1 (E given) normal equations, and only alpha is searched: a grid over
// log alpha in [1e-4, 10] brackets the least residual, golden-section search refines it.
// A shared E is found the same way one level up: for a fixed E every curve is its own
// one-parameter search, and E is searched over [0, the lowest mean loss). No starting
// guess is needed and the result does not depend on one (scipy's curve_fit, which the
// tests compare against, does need one).
//
// Points at one compute enter through their count and mean (the least-squares problem
// on all points is the one on the means weighted by their counts, plus the spread within
// each compute, which no curve can remove), so a fit costs per compute, not per point,
// and a bootstrap replicate's repeated seeds are weights.
//
// E is kept >= 0 (a cross-entropy is never negative, and an E below 0 is a curve that
// predicts one); where the unconstrained least squares would put E below 0 the fit has
// E = 0. A fit fails, with the reason, on too few distinct computes, on an alpha at the
// edge of its range (the losses follow no power law that falls with compute there), on
// A <= 0 (the loss does not fall with compute), and for a shared E at the top of its
// range.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace xsagpt {

// The points of one curve, grouped by compute.
class CurvePoints {
 public:
  // A (compute, loss) point counted `weight` times (a bootstrap's repeated seed).
  void add(double compute, double loss, double weight = 1);
  struct Group {
    double compute = 0, weight = 0, sum = 0, sum_sq = 0;
    double mean() const { return sum / weight; }
  };
  const std::vector<Group>& groups() const { return groups_; }
  double points() const;       // the total weight
  double within_ss() const;    // the squared deviations from each compute's mean
  double lowest_mean() const;  // the least mean loss over the computes

 private:
  std::vector<Group> groups_;
};

struct PowerLaw {
  double E = 0, A = 0, alpha = 0;
  double loss(double compute) const;
  // The compute at which the curve comes down to `loss`; none at or below E.
  std::optional<double> compute_at(double loss) const;
};

struct PowerLawFit {
  std::optional<PowerLaw> law;  // empty: the fit failed, `why` says why
  std::string why;
  double points = 0;  // total weight
  double sse = 0;     // squared residuals over every point
  double rmse() const;
};

// E fitted (>= 0) when fixed_e is empty, else E = *fixed_e.
PowerLawFit fit_power_law(const CurvePoints& c, std::optional<double> fixed_e);

// One E (>= 0) for every curve, each with its own A and alpha.
std::vector<PowerLawFit> fit_shared_e(const std::vector<CurvePoints>& curves);

}  // namespace xsagpt
