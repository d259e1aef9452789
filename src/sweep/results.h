// Sweeps, the end: the summary files, the results table, the figures and what did not
// finish, written by whichever process ends a whole sweep, or by `--summarize` from
// the points that are done while others may still train.
#pragma once

#include "distributed/context.h"
#include "sweep/grid.h"

#include <string>
#include <vector>

namespace xsagpt {

// The points that did not finish, by why.
struct Unfinished {
  std::vector<std::string> failed, busy, foreign;
  std::vector<std::string> waiting;  // branches whose checkpoint to start from is not there (sweep/branch.h)
  bool clean() const { return failed.empty() && busy.empty() && foreign.empty() && waiting.empty(); }
};

// The end of a sweep that went through every point: the summary, the table, the
// figures (with `draw`) and what did not finish. Rank 0 writes and prints.
void report_end(const Sweep& sweep, const Unfinished& u, bool draw, DistContext& dist);

// `xsagpt sweep --summarize`: summary.json, summary.csv, report.md and the figures
// from the points that are done, and a line for every point that is not, with why.
// Returns 0 when every point is done, 1 otherwise.
int summarize_sweep(const Sweep& sweep, bool draw);

}  // namespace xsagpt
