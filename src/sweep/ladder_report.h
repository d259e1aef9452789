// Sweeps, the ladder's report: summary.json's "ladder" section (sweep/ladder_summary.h)
// as a person reads it, printed at the end of `xsagpt sweep` and as a section of
// report.md. One table, a row per rung: parameters, tokens, training FLOPs, the
// baseline's final val loss (mean over seeds), and per variant its loss, its difference
// from the baseline paired by seed with the 95% interval, and its compute multiplier
// with the bootstrap interval. Then each variant's fitted curve L(C) = E + A C^-alpha,
// the rule that chose E, the trend of the multiplier with compute and its interval, the
// multiplier carried to the extrapolation targets (marked as extrapolation), the rate
// each variant won at per rung when rates were swept, and every point left out of the
// fit with why.
#pragma once

#include "config/schema.h"

#include <string>

namespace xsagpt {

// Aligned text for the terminal; "" when the summary has no ladder.
std::string ladder_table(const json& summary);

// The report.md section ("## Ladder ..."); "" when the summary has no ladder.
std::string ladder_markdown(const json& summary);

}  // namespace xsagpt
