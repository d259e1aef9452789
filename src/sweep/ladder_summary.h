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
//   "lr_sensitivity" (with lr_multipliers): per variant and rung its loss at every rate
//             tried, their spread and Wortsman et al.'s LR sensitivity (sweep/lr_sensitivity.h);
//   "observations": per variant, rung and seed at that rate: the final val loss, the
//             compute it used (flops_per_token x the tokens its done.json counts) and its
//             median seconds per step (sweep/step_time.h; null without two train records);
//   "left_out": the points at the judged rate that are not observations (failed,
//             diverged, invalid, unfinished), each named with why;
//   "analysis": sweep/ladder_analysis.h's fit over the observations (or "error").
#pragma once

#include "sweep/grid.h"

namespace xsagpt {

json ladder_summary(const Sweep& sweep, const json& points);

}  // namespace xsagpt
