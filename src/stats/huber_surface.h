// Ladders with several data ratios, the loss surface in parameters N and training tokens D
// as Chinchilla's Approach 3 fits it (Hoffmann et al. 2022, "Training Compute-Optimal Large
// Language Models", eq. 2 and appendix D.2):
//   L(N, D) = E + A N^-alpha + B D^-beta,
// chosen to minimise the Huber loss (delta 1e-3) of the log residuals, log L(N_i, D_i) -
// log loss_i, by L-BFGS from a grid of starts: stats/huber_fit.h's machinery
// (stats/huber_lbfgs.h), with its rule that E stays between 0 and the lowest observed loss.
//
// Parameters e = log E, a = log A and b = log B at reference sizes (the points' geometric
// means of N and of D, so that the starts need not know their magnitudes), alpha and beta;
// log of the prediction is logsumexp(a - alpha x, b - beta y, e), x = log(N / N_ref),
// y = log(D / D_ref). Starts: E at 10%, 50% and 90% of the cap, alpha and beta each 0.15
// and 0.5, a and b from the points' mean excess over E split between the two terms (12
// starts: the summary refits after every point, and each start costs milliseconds).
// Where the best end puts E above the cap, E is held at the cap and the rest fitted again.
// No fit, with why: fewer than 6 points (5 parameters and one residual), fewer than 3
// distinct N or 3 distinct D, an end with alpha or beta <= 0, or no finite end.
//
// Under a compute budget C = 6 N D (Chinchilla's approximation of the training FLOPs), the
// surface's minimum lies at N_opt = G (C/6)^(beta/(alpha+beta)) and D_opt = (C/6) / N_opt,
// G = (alpha A / (beta B))^(1/(alpha+beta)), where the loss is E + K (C/6)^-gamma with
// gamma = alpha beta / (alpha + beta) and K = A G^-alpha + B G^beta: a power law in C, the
// compute-optimal frontier.
#pragma once

#include "stats/huber_fit.h"
#include "stats/scaling_fit.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace xsagpt {

struct SurfacePoint {
  double params = 0, tokens = 0, loss = 0;
};

struct Surface {
  double E = 0, A = 0, alpha = 0, B = 0, beta = 0;
  double loss(double params, double tokens) const;
  // The compute-optimal parameters and tokens for a budget of C = 6 N D FLOPs.
  std::pair<double, double> optimal(double compute) const;
  // The loss at the compute-optimal point as a power law in C (E, K 6^gamma, gamma).
  PowerLaw frontier() const;
};

using SurfaceFit = HuberFitOf<Surface>;

constexpr size_t kSurfaceMinPoints = 6;

SurfaceFit fit_huber_surface(const std::vector<SurfacePoint>& points, double delta = kHuberDelta);

// The objective itself, for a surface at these points: sum of huber_delta(log L(N, D) - log loss).
double huber_surface_objective(const std::vector<SurfacePoint>& points, const Surface& law, double delta = kHuberDelta);

}  // namespace xsagpt
