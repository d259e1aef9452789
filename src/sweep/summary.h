// Sweeps, the summary: what the points of a sweep (sweep/grid.h) came to, read
// from their run directories, as summary.json, summary.csv and report.md beside them.
#pragma once

#include "sweep/grid.h"

namespace xsagpt {

// summary.json / summary.csv from the points' done.json and metrics.jsonl files:
//   "points": per point its variant, values, status (done; invalid with the reason
//             in "error": a run of another config in its directory, or a finished run
//             that fails a check of sweep/point_check.h, left out of every comparison;
//             failed with its error; running; pending) and final losses;
//   "differences": per point of a variant, its final val loss minus the baseline's at
//             the same values and seed;
//   "comparisons": per variant and setting of the other keys (the seed aside), the
//             final val loss over seeds (mean, sd, min, max, n) beside the baseline's,
//             and the variant minus the baseline paired by seed ("minus_baseline": n,
//             mean, sd, df, 95% t interval, paired t-test t and two-sided p, the seeds
//             used and those dropped with the reason; "p_holm": p Holm-adjusted across the
//             variants at this setting, and "holm_m": how many p-values that family holds,
//             stats/holm.h); the same at equal wall-clock time
//             ("equal_time") and equal tokens ("equal_tokens"), each pair read at the earlier
//             of its two ends, the curve that ended later interpolated there ("at": seed, x,
//             end_of: whose end x is, val_loss, baseline_val_loss), a pair listed instead
//             only where one curve starts after the other ends ("extrapolation_refused":
//             seed, x, baseline_start, variant_start); the iso-loss multiplier in tokens and
//             in time ("iso_loss": sweep/iso_loss.h; each measure's p Holm-adjusted across the
//             variants as the final loss's is); and the ratio of the variant's step time
//             to the baseline's;
//   "trends": per variant, numeric grid key (train.seq_len, train.lr, ...) and setting of
//             the other keys, the slope of "differences" against log2 of the key's value
//             with its 95% t interval (sweep/dial_trend.h): does the gap grow along it;
//   "over_seeds" (with train.seed in the grid; and summary_seeds.csv): each variant's
//             groups of points that differ only in the seed, with their final val losses'
//             mean, sample standard deviation, min and max.
// report.md (sweep/report.h) holds the comparisons as a person reads them.
json sweep_summary(const Sweep& sweep);
// Writes them and returns the summary written.
json write_summary(const Sweep& sweep);

}  // namespace xsagpt
