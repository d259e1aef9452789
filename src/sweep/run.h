// Running a sweep: every point of the grid as a training run, in order, restartably,
// then the comparison of every variant with the baseline (summary.json, report.md, a
// table) and the figures; or one point of it (`--point`). `xsagpt sweep` parses its
// options and calls this.
//
// Any number of processes may work in one sweep directory at once, whole sweeps and
// single points alike, on one machine or several sharing the directory: each point is
// trained by whichever process takes its lock first (sweep/point_lock.h), and the
// others pass it by, naming its holder. A rerun continues: finished points are
// skipped, an interrupted one resumes from its checkpoint, a failed one stays failed
// unless retried. A point's directory holding a run of another config
// (sweep/point_check.h) is refused, or with `force` run again from the start; a
// point's failure (divergence, bad data, out of memory) is recorded in its failed.json
// and the queue goes on.
#pragma once

#include "distributed/context.h"
#include "sweep/grid.h"

#include <string>

namespace xsagpt {

// The exit statuses of `xsagpt sweep`, a whole sweep or one point.
inline constexpr int kSweepDone = 0;         // every point asked for is done
inline constexpr int kSweepIncomplete = 1;   // a point failed, is invalid, is held by another live process or lost to one
inline constexpr int kSweepInterrupted = 3;  // stopped by a signal (also at start-up); the same command continues it

struct SweepRunOptions {
  bool force = false;         // continue after the sweep file changed; stale points start over
  bool retry_failed = false;  // run the points that failed before again
  bool plot = true;           // draw the figures at the end (scripts/view/plot.py)
  std::string watch_hint;     // how to watch it live, logged once the sweep starts
};

// Runs the sweep's points and writes its summary. Returns one of the statuses above.
// Throws ConfigError before any point runs when the sweep cannot start.
int run_sweep(const Sweep& sweep, const SweepRunOptions& opts, DistContext& dist);

// A tuning ladder's sweep (sweep/ladder_tuning.h) whose larger rungs still wait: true
// when a live process (another on the same directory) holds one of its tuning points,
// after 5 s (so that the caller loads the sweep again and finds the rates it settles);
// false when none does, or on a stop signal.
bool wait_for_tuning(const Sweep& sweep, DistContext& dist);

// Runs point `index` alone, with the checks a whole sweep makes of it, and writes no
// summary (`--summarize` does). Returns one of the statuses above.
int run_sweep_point(const Sweep& sweep, size_t index, const SweepRunOptions& opts, DistContext& dist);

// The point `--point` names: its index in the dry run's order ("0", "7": an index
// whenever it is all digits) or its name. ConfigError naming `option` otherwise.
size_t find_point(const Sweep& sweep, const std::string& which, const std::string& option);

}  // namespace xsagpt
