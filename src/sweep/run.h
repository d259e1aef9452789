// Running a sweep: every point of the grid as a training run, in order, restartably,
// then the comparison of every variant with the baseline (summary.json, report.md, a
// table) and the figures. `xsagpt sweep` parses its options and calls this.
//
// One sweep process owns the sweep directory (util/dir_lock.h). A rerun continues:
// finished points are skipped, an interrupted one resumes from its checkpoint, a
// failed one stays failed unless retried. A point's directory holding a run of
// another config (sweep/point_check.h) is refused, or with `force` run again from
// the start; a point's failure (divergence, bad data, out of memory) is recorded in
// its failed.json and the queue goes on.
#pragma once

#include "distributed/context.h"
#include "sweep/grid.h"
#include "sweep/ladder_plan.h"

#include <string>

namespace xsagpt {

struct SweepRunOptions {
  bool force = false;         // continue after the sweep file changed; stale points start over
  bool retry_failed = false;  // run the points that failed before again
  bool plot = true;           // draw the figures at the end (scripts/view/plot.py)
  std::string watch_hint;     // how to watch it live, logged once the sweep owns its directory
};

// The grid and its resolved runs (and a ladder's rungs); with `memory` (the dry run),
// each point's memory estimate on the device it would train on and, in a ladder, each
// point's FLOPs and estimated time with the total (sweep/ladder_plan.h), its steps timed
// by `measure` where the ladder names no estimate. Prints to stdout.
void print_sweep_plan(const Sweep& sweep, int64_t world_size, bool memory, const MeasureStep& measure);

// Runs the sweep's points and writes its summary. Returns the exit status: 0 when
// every point finished (or the sweep was interrupted, to be continued by the same
// command), 1 when a point failed, was in use by another process or holds another
// config's run. Throws ConfigError / DirBusy before any point runs when the sweep
// cannot start.
int run_sweep(const Sweep& sweep, const SweepRunOptions& opts, DistContext& dist);

}  // namespace xsagpt
