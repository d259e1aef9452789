// Sweeps, a run's time per optimizer step from its metrics.jsonl, for the ladder's
// multiplier in wall time (sweep/ladder_analysis.h): the median, over each train record
// and the record before it (a train record, or an evaluation's, written when the
// evaluation has finished), of the seconds between them over the steps between them. The median rather
// than the first-to-last average, because the first steps carry start-up (allocation,
// the first kernels' tuning) and an interval holding an evaluation or a checkpoint is
// longer than the steps in it: neither moves a median of many intervals.
//
// Lines are read as sweep/summary.cpp reads them: one that does not parse or lacks a
// step or time_s is skipped; a train record at or below the last record's step, or any
// record below it, marks a restart, whose records replace what followed; an interval whose time does not grow (a clock
// restarted with the run) is not counted.
#pragma once

#include <filesystem>
#include <optional>

namespace xsagpt {

// Empty without a train record a step or more after an earlier record.
std::optional<double> median_step_time(const std::filesystem::path& metrics);

}  // namespace xsagpt
