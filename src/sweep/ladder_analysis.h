// Ladders, the analysis across rungs: does a variant's win over the baseline grow with
// scale? A ladder runs every variant at several sizes (rungs) and seeds; this fits each
// variant's final val loss against its training compute with a power law
// (stats/scaling_fit.h), L(C) = E + A C^-alpha, and turns the gap between the fitted
// curves into compute: at each rung, the variant's compute over the compute the
// baseline's curve needs to reach the variant's loss. Comparing curves, not single
// runs, is what lets the answer be read across sizes and carried past the ladder.
//
// The rule for E (the loss no amount of compute removes) counts the ladder's rungs,
// because a curve with three parameters fitted to three rungs passes through them with
// nothing left to check it: with 4 or more rungs E is fitted per variant ("free"); with
// 3, one E is shared by every variant ("shared": a joint fit, one E and per variant A and
// alpha, so 3 rungs per variant leave a residual); with 2 rungs E = 0 ("zero": a pure
// power law, the only two-parameter curve the rule can fit). The count is the fewest
// rungs of any variant with a fit (the baseline and every variant with 2 or more).
//
// The variant's loss at a rung is its FITTED loss at its compute there (not the
// observed mean): smooth across rungs, the same curve that extrapolation reads, and one
// noisy rung moves the curve rather than the multiplier alone. Below 1 the variant is
// better (the iso-loss convention of sweep/iso_loss.h). Where the variant's fitted loss
// is at or below the baseline's E the baseline never reaches it: no multiplier, and
// "why" says so.
//
// Intervals: a paired bootstrap over seeds. A replicate draws as many seeds as there are,
// with replacement (std::mt19937_64 seeded by rng_seed: the same inputs give the same
// intervals); a drawn seed brings all its rungs for every variant, baseline included;
// every curve is refitted by the same E rule and every figure recomputed; the 95%
// interval is the estimate -/+ t_{0.975, n-1} sqrt(n / (n - 1)) standard deviations of the
// kept replicates, n the seeds (a multiplier's on the log scale; the draws and the interval
// are stats/bootstrap.h's). A replicate in
// which a fit fails (the baseline's, or one of a variant whose fit on all the data
// succeeded) is dropped and counted. A replicate in which the baseline never reaches a
// variant's loss counts that multiplier as 0 (its limit: the baseline would need
// unbounded compute), so that multiplier's interval runs from 0, and leaves that
// variant's trend out (counted in "left_out"). With one seed there is nothing to
// resample: no interval, and the output says so. Student's factor is what keeps the
// intervals honest with the few seeds ladders have (the plain percentile interval covered
// 0.75 at 3 seeds); they carry the seeds' noise, not the power law's own error. Two seeds
// give 3 possible draws, and still an interval: for a figure linear in the seeds it is
// the paired t interval with one degree of freedom, and on simulated ladders the
// multipliers' and the trend's covered 0.95-0.96 at 2 seeds as at 3 and 5
// (scripts/study/coverage.py; docs/sweeps-and-plots.md has the table).
//
// A multiplier needs the baseline measured at its rung: where the baseline has no result
// (its run failed or is not done), the variant's multiplier there reads the baseline's curve
// away from the baseline's own data. It is an extrapolation, flagged as the targets' are
// ("extrapolation": true, how many decades past the baseline's rungs, none past
// extrapolate_decades), and the trend leaves it out.
//
// The trend: the least-squares slope of log multiplier against log compute over the
// rungs where the baseline was measured, with its bootstrap interval. Below 0 the
// multiplier falls as compute grows: the win grows with scale. 0 is a constant multiplier.
//
// Extrapolation: at each target compute (the paper's sizes), both the multiplier read off
// the two fitted curves and the trend's line carried there (exp(intercept + slope log C)),
// each with its bootstrap interval. Neither is given more than extrapolate_decades (1 by
// default) of compute past the ladder's rungs: a power law fitted over a decade or two
// says nothing checked about the ninth decade beyond, and a number printed there reads as
// a finding. Further out the values are null and "why" says how far the target lies.
//
// The multiplier in wall time, per rung: the compute multiplier times the variant's step
// time over the baseline's there (each run's median seconds per step, paired by seed,
// the geometric mean of the seeds' ratios): what the variant's compute saving is worth
// on this machine once its steps' own cost is counted (a variant that needs 0.9x the
// compute at 1.2x the time per step needs 1.08x the time). Its interval is the same
// bootstrap's: each replicate's multiplier times the replicate's ratio over the seeds
// it drew.
//
// Also per rung: the observed paired difference (variant minus baseline final val loss,
// per seed present in both) with its Student-t 95% interval and paired t-test (stats/paired.h),
// the test's p Holm-adjusted across the variants compared at that rung (stats/holm.h).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace xsagpt {

// One finished run of a ladder: its variant, rung (any integer; rungs are ordered by
// it), seed, training compute (FLOPs, > 0) and final val loss.
struct LadderObservation {
  std::string variant;
  int rung;
  int64_t seed;
  double compute;
  double loss;
  std::optional<double> step_time = std::nullopt;  // median seconds per step (run/metrics_history.h), for the time multiplier
};

struct LadderOptions {
  std::string baseline;
  std::vector<std::string> variants;                           // non-baseline
  std::vector<std::pair<std::string, double>> extrapolate_to;  // name, compute (FLOPs)
  double extrapolate_decades = 1;   // how far past the rungs' computes a multiplier is carried, in decades
  bool extrapolate_decades_asked = false;  // the sweep file set it (the why says so)
  bool huber = true;  // the Huber fits beside (a simulation of thousands of ladders leaves them out)
  int bootstrap = 2000;                                        // replicates
  uint64_t rng_seed = 0;
};

// The analysis as JSON. Observations of variants named nowhere in `opt` are ignored; a
// compute that is not a positive number, a loss that is not finite, or two observations
// of one variant, rung and seed throw ConfigError naming them.
//
// {"baseline": name,
//  "e_rule": "free" | "shared" | "zero" | null (fewer than two rungs: no fit),
//  "e_rule_why": the rule and the rung count it read,
//  "seeds": number of distinct seeds,
//  "bootstrap": {"replicates", "kept", "dropped", "rng_seed", "method", "warning" (past 5%
//                dropped)} or {"none": why: "one seed: no interval", no fit, 0 replicates},
//  "fits": {variant (baseline included): {"E", "A", "alpha", "points", "rmse", "computes" (distinct
//           computes: rungs), "parameters" (fitted to them), "parameters_of" ("this curve", or the
//           joint fit a shared E makes, whose computes and parameters these then are),
//           "residual_freedom" (computes > parameters: false means the curve passes through its
//           rungs' means exactly, whatever the seeds, and nothing in the data checks it)}
//           or {"points", "why"} where the curve could not be fitted},
//  "huber_fits": {variant: {"E", "A", "alpha", "points", "objective", "e_cap" (the lowest observed loss),
//                 "e_capped", "starts"} or {"points", "why"}} (stats/huber_fit.h, on every point of the
//                 curve, beside "fits"),
//  "multipliers_from": which fits the multipliers are read from, and why, in words,
//  "rungs": [{"rung" (every rung of any curve, in order),
//             "baseline": {"compute", "loss" (observed mean), "n", "sd" (sample standard deviation of its
//                          seeds' losses, null below 2: the noise floor)} (null without results there),
//             "variants": {v: {"compute", "loss" (observed mean), "fitted_loss", "n", "pairs" (seeds
//                              in both),
//                              "difference" (mean paired difference), "difference_ci95" ([lo, hi] or null),
//                              "difference_p" (the paired t-test's two-sided p, or null), "difference_p_holm"
//                              (it Holm-adjusted across the variants at this rung), "holm_m" (their count
//                              with a p: stats/holm.h),
//                              "multiplier" (or null), "multiplier_ci95" ([lo, hi] or null),
//                              "why" (when the multiplier is null),
//                              "extrapolation" (true where the baseline has no result at this rung:
//                              the multiplier reads its curve away from its data), with
//                              "decades_past_baseline" (past its rungs' computes; 0 between them) and
//                              "extrapolation_why" (where the multiplier is given),
//                              "step_time_ratio" (the variant's median step time over the baseline's,
//                              geometric mean over the seeds with both; null without), "step_time_pairs",
//                              "time_multiplier" (multiplier x step_time_ratio), "time_multiplier_ci95",
//                              "time_why" (when the time multiplier is null)}}}],
//  "trend": {v: {"slope", "ci95", "left_out"} or {"slope": null, "ci95": null, "why"}, and where a rung with
//            a multiplier had no baseline, "rungs_without_baseline" ([rung, ...], left out) and "rungs_why"},
//  "extrapolate_decades": how far past the rungs a multiplier is carried,
//  "extrapolation": {v: [{"name", "compute", "multiplier" (or null), "ci95" (or null),
//                         "trend_multiplier", "trend_ci95" (the trend's line carried there, exp(intercept +
//                         slope log C), with its bootstrap interval; null with "trend_why"),
//                         "extrapolation" (true: beyond the ladder's computes),
//                         "decades_past_ladder" (log10 of how far beyond: past the largest rung, or
//                         short of the smallest; 0 within), "residual_freedom" (both curves' fits
//                         had it; null without both fits), "why" (when null: also every target more
//                         than extrapolate_decades past the ladder, "9.0 decades past the ladder, ...")}]}}
// A compute is the mean over a rung's seeds; a variant's multiplier is at its own compute.
nlohmann::json ladder_analysis(const std::vector<LadderObservation>& obs, const LadderOptions& opt);

}  // namespace xsagpt
