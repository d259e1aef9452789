// Sweeps, the ladder's results: summary.json's "ladder" section, from the points of a
// ladder sweep (sweep/ladder.h) as the summary read them (sweep/summary.h):
//   "rules":  the size, token, rate and schedule rules in words;
//   "rungs":  per rung its name, n_layer, d_model, n_head, params, tokens, steps,
//             warmup_steps, flops_per_token, flops (training compute) and lr;
//   "lr_choice" (with lr_multipliers): per variant and rung the multiplier it is judged
//             at: the one with the lowest mean final val loss over its seeds among those
//             where the most seeds finished (a rate at which a seed failed or diverged
//             loses to one at which none did), each candidate's mean and n, and
//             "at_edge" when the winner is the smallest or largest multiplier swept;
//             at a rung above tune_rungs, the one multiplier run there, its "origin"
//             in words and its tuning's at_edge;
//   "tuning" (with tune_rungs): per variant the multiplier carried up ("lr_mult", null
//             while its tuning rungs run, with "waits" saying why), "tuned_at" (the
//             rungs), "carried_by" ("mup" or "rate rule"), "origin" in words,
//             "at_edge", "past_edge" (the multiplier tried past an edge, or null) and
//             the "candidates" (mean final val loss over the tuning rungs and seeds, n);
//   "lr_sensitivity" (with lr_multipliers): per variant and rung its loss at every rate
//             tried (with tune_rungs, at the tuning rungs alone), their spread and
//             Wortsman et al.'s LR sensitivity (sweep/lr_sensitivity.h);
//   "observations": per variant, rung and seed at that rate: the final val loss, the
//             tokens its done.json counts, the compute it used (flops_per_token x those) and its
//             median seconds per step (run/metrics_history.h; null without two train records);
//   "left_out": the points at the judged rate that are not observations (failed,
//             diverged, invalid, unfinished), each named with why;
//   "analysis": sweep/ladder_analysis.h's fit over the observations (or "error").
// With several data ratios (sweep/ladder_budgets.h) each rung row has "budgets" (ratio,
// steps, tokens, branch_step: where it branches off the rung's longest run) and
// "ratios" holds, per ratio ascending, {"ratio", "lr_choice", "observations",
// "left_out", "analysis"}: the fit across rungs at that ratio alone. The fields above
// are then the longest ratio's (the rungs' own runs), with its "ratio"; and "surface" is
// the fit across ratios (sweep/ladder_surface.h) over every ratio's observations.
#pragma once

#include "sweep/grid.h"

namespace xsagpt {

json ladder_summary(const Sweep& sweep, const json& points);

}  // namespace xsagpt
