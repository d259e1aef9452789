// Sweeps, one point: the checks a point gets before it trains (another config's run in
// its directory, finished, failed before), its lock (sweep/point_lock.h) so that no
// other process trains it at the same time, the training itself with its failure
// recorded rather than thrown, and the outcome. A whole sweep calls it for each point
// in turn; `xsagpt sweep --point K` for one.
#pragma once

#include "distributed/context.h"
#include "sweep/grid.h"
#include "sweep/point_lock.h"

#include <string>

namespace xsagpt {

// kWaiting: a branch whose checkpoint to start from is not there yet (sweep/branch.h).
enum class PointOutcome { kFinished, kFailed, kBusy, kForeign, kWaiting, kInterrupted };

struct PointRun {
  bool stale = false;          // its config changed since it was run (--force): start it over
  bool retry_failed = false;   // run it again if it failed before
  bool write_summary = true;   // rewrite the sweep's summary once it ends (a whole sweep does)
  std::string tag;             // how log lines name it: "[2/8] sa,train.seed=2"
  PointLockTiming timing;      // when a holder's lock is stale
};

// Runs point `p` of `sweep` as `run` says, on every rank (only rank 0 takes the lock
// and writes the sweep's files; every rank agrees on the outcome). On several ranks a
// point's failure is rethrown once recorded: the other ranks may be stuck in a
// collective, so the process stops there.
PointOutcome run_point(const Sweep& sweep, const SweepPoint& p, const PointRun& run, DistContext& dist);

}  // namespace xsagpt
