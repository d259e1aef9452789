// Sweeps, the plan: what `xsagpt sweep` prints before it trains, and all that
// `--dry-run` prints: the grid and its resolved runs, each point's memory estimate on
// the device it would train on, and a ladder's rungs, FLOPs and estimated time.
#pragma once

#include "sweep/grid.h"
#include "sweep/ladder_plan.h"

namespace xsagpt {

// The grid and its resolved runs (and a ladder's rungs); with `memory` (the dry run),
// each point's memory estimate on the device it would train on and, in a ladder, each
// point's FLOPs and estimated time with the total (sweep/ladder_plan.h), its steps timed
// by `measure` where the ladder names no estimate. Prints to stdout.
void print_sweep_plan(const Sweep& sweep, int64_t world_size, bool memory, const MeasureStep& measure);

}  // namespace xsagpt
