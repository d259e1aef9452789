// Sweeps, the plan: what `xsagpt sweep` prints before it trains, and all that
// `--dry-run` prints: the grid and its resolved runs, each point's memory estimate on
// the device it would train on, a ladder's rungs, FLOPs and estimated time, and with a
// "slurm" section the sweep's cost on the cluster.
#pragma once

#include "sweep/grid.h"
#include "sweep/ladder_plan.h"

#include <string>

namespace xsagpt {

// The grid and its resolved runs (and a ladder's rungs); with `memory` (the dry run),
// each point's memory estimate on the device it would train on and, in a ladder, each
// point's FLOPs and estimated time with the total (sweep/ladder_plan.h), its steps timed
// by `measure` where the ladder names no estimate; with a "slurm" section, the cost on
// the cluster (sweep/slurm_estimate.h) and what --slurm would refuse. `sweep_file`:
// the file the sweep was read from. Prints to stdout.
void print_sweep_plan(const Sweep& sweep, const std::string& sweep_file, int64_t world_size, bool memory,
                      const MeasureStep& measure);

}  // namespace xsagpt
