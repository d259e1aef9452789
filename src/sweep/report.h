// Sweeps, the report: the comparisons of a sweep's summary (sweep/summary.h), every
// variant against the baseline paired by seed, as the table `xsagpt sweep` prints and
// as report.md in the sweep directory. Both carry the same cells: final val loss as
// mean ± sd over seeds; the variant minus the baseline with its 95% t interval and
// the paired t-test's two-sided p; the same at equal wall-clock time and equal tokens
// (each pair at the earlier of its two ends, and the time it was read at); the
// step-time ratio; the iso-loss multiplier in tokens and in time with its interval
// (sweep/iso_loss.h); and notes on seeds that could not be paired, comparisons that
// would have extrapolated and seeds that never reached the baseline's final loss; and,
// after them, the difference's trend along each numeric grid key (sweep/dial_trend.h).
#pragma once

#include "config/schema.h"

#include <filesystem>
#include <string>

namespace xsagpt {

// Aligned columns for a terminal.
std::string comparison_table(const json& summary);

// The markdown report of a sweep in `dir` (named in its title).
std::string sweep_report(const json& summary, const std::filesystem::path& dir);

}  // namespace xsagpt
