// Sweeps, the summary: what the points of a sweep (sweep/grid.h) came to, read
// from their run directories, as summary.json and summary.csv beside them.
#pragma once

#include "sweep/grid.h"

namespace xsagpt {

// summary.json / summary.csv from the points' done.json files: per point its values,
// status (done, failed with its error, running, pending) and final losses; for each SA/XSA pair differing only in
// attention, XSA - SA val loss. With train.seed in the grid also "over_seeds" (and summary_seeds.csv): every group of
// points differing only in the seed with the mean, sample standard deviation, min and max of its final val losses, and
// per SA/XSA pair of groups the difference of the means and the spread of the per-seed differences.
json sweep_summary(const Sweep& sweep);
void write_summary(const Sweep& sweep);

}  // namespace xsagpt
