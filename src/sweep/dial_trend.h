// Sweeps, the trend along a numeric dial: does a variant's gap to the baseline grow as a
// numeric grid key grows (train.seq_len 512 -> 16384: does XSA's win widen with context)?
// For each variant, each numeric key of the grid and each setting of the other keys
// (the seed aside), the paired differences of the summary (variant minus baseline final
// val loss, same seed and values) against log2 of the key's value: the least-squares
// slope, the change in the difference per doubling of the key, with its 95% Student's t
// interval on n - 2 degrees of freedom from the residuals (stats/line_fit.h). Every
// finished pair is a point, so one seed per value is enough for an interval once there
// are three values; with several seeds the seeds' spread enters through the residuals.
//
// A key is a dial when every point of the grid gives it a positive number (log2 needs
// one) and it takes two values or more; train.seed never is.
#pragma once

#include "config/schema.h"

namespace xsagpt {

// From a summary's "keys" and "differences" (sweep/summary.h):
//   [{"key", "variant", "values" (the other keys, seed aside), "n" (pairs),
//     "levels": [{"value", "n", "mean"}] (the key's values with pairs, their mean difference),
//     "slope" (difference per doubling; null below two levels), "ci95" ([lo, hi]; null below
//     three pairs), "df", "why" (when slope or ci95 is null)}]
json dial_trends(const json& summary);

}  // namespace xsagpt
