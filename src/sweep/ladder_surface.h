// Ladders with several data ratios (sweep/ladder_budgets.h), the fit across ratios: each
// variant's loss surface in parameters and tokens, L(N, D) = E + A N^-alpha + B D^-beta
// (stats/huber_surface.h: Chinchilla's form and Huber fit), from every finished point of
// every ratio at the rate it is judged at. N is the parameter count the ladder's token
// rule counts (total or non-embedding), D the tokens a point trained on.
//
// From each surface, the compute-optimal allocation of a budget C = 6 N D and the loss
// there (the frontier, a power law in C); and each variant's multiplier at the
// compute-optimal ratio: its budget over the budget the baseline's frontier needs to
// reach the variant's frontier loss at C (below 1 the variant needs less; none where
// the variant's loss is at or below the baseline's E, or where its optimum or the
// baseline's lies at a ratio outside those the points trained at). The budgets are each rung's
// longest run (6 N D of it) and the ladder's extrapolation targets (their training
// compute), none carried more than extrapolate_decades past the points' budgets. The
// per-ratio multipliers (each ratio's own fit across rungs, sweep/ladder_analysis.h)
// are printed beside these. No interval: one fit on every seed's points (the surface's
// L-BFGS from a grid of starts is too slow to refit per bootstrap replicate).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace xsagpt {

struct SurfaceObservation {
  std::string variant;
  double params = 0, tokens = 0, loss = 0;
};

// {"fits": {variant (baseline included): {"E", "A", "alpha", "B", "beta", "points", "objective",
//           "e_cap", "e_capped", "starts"} or {"points", "why"}},
//  "budgets": [{"name", "compute", "decades_past_ladder",
//               "baseline": {"params", "tokens", "ratio" (tokens per parameter), "loss"} or null,
//               "variants": {v: {"params", "tokens", "ratio", "loss", "multiplier" (or null), "why"}},
//               "why" (where the budget lies too far past the points)}]}
nlohmann::json ladder_surface(const std::vector<SurfaceObservation>& obs, const std::string& baseline,
                              const std::vector<std::string>& variants,
                              const std::vector<std::pair<std::string, double>>& budgets, double extrapolate_decades);

}  // namespace xsagpt
