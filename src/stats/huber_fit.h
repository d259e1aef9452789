// Ladders, the power-law fit as the field makes it (Chinchilla's Approach 3, as OLMo-core
// fits its ladders): L(C) = E + A C^-alpha chosen to minimise the Huber loss (delta 1e-3)
// of the log residuals, log L(C_i) - log loss_i, by L-BFGS (LibTorch's, in float64) from a
// grid of starting points, the best end kept. E is kept between 0 and the lowest observed
// loss: a floor above a loss the ladder already reached is a curve that the data
// contradict. The ladder analysis prints it beside its least-squares fit
// (stats/scaling_fit.h) as a check on that fit, not in its place.
//
// Why both: least squares on the losses is what the multipliers and their bootstrap use
// (closed-form in E and A, no starting point, fast enough to refit thousands of times);
// the Huber loss on log residuals is what scaling-law papers report, weighs every rung's
// relative error alike and lets one outlying run count linearly rather than squared.
// Where the two disagree, the curve is not pinned down by the data.
//
// How: parameters e = log E, a = log A at a reference compute (the geometric mean of the
// points', so that the starts need not know the FLOPs' magnitude) and alpha; log of the
// prediction is logsumexp(a - alpha x, e), x = log(C / reference). Starts: E at 10%, 50%
// and 90% of the cap, alpha 0.05, 0.2, 0.5 and 1, a from the points at that E. Where the
// best unconstrained end puts E above the cap, E is fixed at the cap and A and alpha are
// fitted again from the same starts ("e_capped"). Fewer than 5 points, or fewer than 3
// distinct computes, give no fit, with why; so does an end with alpha <= 0 (the loss does
// not fall with compute) or a non-finite loss.
#pragma once

#include "stats/scaling_fit.h"

#include <optional>
#include <string>
#include <vector>

namespace xsagpt {

struct HuberPoint {
  double compute = 0, loss = 0;
};

// What a Huber fit of a law gives (this power law, or stats/huber_surface.h's surface).
template <class Law>
struct HuberFitOf {
  std::optional<Law> law;  // empty: no fit, `why` says why
  std::string why;
  size_t points = 0;
  double objective = 0;  // the sum of Huber losses of the log residuals at the fit
  double e_cap = 0;      // the lowest observed loss
  bool e_capped = false; // E was held at the cap
  int starts = 0;        // starting points tried (both phases)
};
using HuberFit = HuberFitOf<PowerLaw>;

constexpr double kHuberDelta = 1e-3;
constexpr size_t kHuberMinPoints = 5;

HuberFit fit_huber_power_law(const std::vector<HuberPoint>& points, double delta = kHuberDelta);

// The objective itself, for a law at these points: sum of huber_delta(log law(C) - log loss).
double huber_objective(const std::vector<HuberPoint>& points, const PowerLaw& law, double delta = kHuberDelta);

}  // namespace xsagpt
