// Sweeps, a ladder that tunes each variant once (ladder.tune_rungs): the variants run
// every rate multiplier at the smallest rungs only, and each variant's best multiplier
// there is carried to every larger rung. Tuning at every rung multiplies the ladder's
// cost by the number of multipliers; tuning at the small rungs costs that factor where
// points are cheap. What carries the rate up decides whether it is still the best one:
// under model.parametrization "mup" the rate that is best at one width is best at
// another (Tensor Programs V; docs/mup-transfer.md measures it here), under "sp" the
// ladder's rate rule carries it, which nothing has shown to hold, so the sweep warns.
//
// The choice is read from the tuning points' results each time the sweep is loaded: a
// variant's multiplier is the one with the lowest mean final val loss over its tuning
// rungs and seeds among those where the most points finished (as the ladder's per-rung
// choice, sweep/ladder_summary.h), once none of them is pending or running. With
// tune_past_edge a winner at the smallest or largest multiplier first adds the tuning
// rungs at one multiplier past that edge (ladder.h's past_edge_multipliers), and the
// choice waits for those too; the winner may then be the new edge, which the report flags.
// With several data ratios (sweep/ladder_budgets.h) every ratio runs at every multiplier
// at the tuning rungs, and the rung's longest ratio decides: the shorter ones are its
// branches, so one rate serves them all, and each larger rung's ratios get it together.
// The larger rungs' points are named as any ladder point, "<variant>,rung=<r>,lr_mult=<m>",
// at the variant's multiplier; until it is known they wait, listed with lr_mult=tuned.
#pragma once

#include "sweep/grid.h"

#include <cstdint>

#include <string>
#include <vector>

namespace xsagpt {

// Per variant, its tuning as its points at the tuning rungs (in s.points) stand.
std::vector<LadderTuning> tune_variants(const Sweep& s);

// A sweep as load_sweep gives it, with a tuning ladder's points resolved from the results
// so far: each variant's tuning rungs past an edge that won (tune_past_edge), then, once
// its multiplier is known, its larger rungs at it in place of the points that waited.
// Every command that runs or plans a sweep loads it so.
Sweep load_tuned_sweep(const std::string& path, int64_t world_size);

// Where a variant's rate at the larger rungs comes from, in words: "tuned at d2-d3
// (x0.5), carried by μP", or "... carried by the rate rule, not shown to transfer".
std::string tuning_origin(const SweepLadder& l, const LadderTuning& t);

}  // namespace xsagpt
