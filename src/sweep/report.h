// Sweeps, the report: the comparisons of a sweep's summary (sweep/summary.h), every
// variant against the baseline paired by seed, as the table `xsagpt sweep` prints and
// as report.md in the sweep directory. Both carry the same cells: final val loss as
// mean ± sd over seeds; the variant minus the baseline with its 95% t interval and
// the paired t-test's two-sided p; the same at the baseline's final wall-clock time
// and token count; the step-time ratio; and notes on seeds that could not be paired
// and on comparisons that would have extrapolated.
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
