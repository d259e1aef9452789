// Sweeps, branches: the points of a ladder's shorter data ratios (sweep/ladder_budgets.h).
// A branch is a point like any other (its own directory, lock, config.json, failure
// record and summary row) except how its run starts: not from step 0 but from its
// source's checkpoint at the branch's decay start, the source (SweepPoint::branch_of)
// being the point of the same variant, rung, rate multiplier and grid values at the
// rung's longest budget. Until that checkpoint exists the branch waits: a sweep passes
// it by (and comes back to it while the source trains in another process), `--point`
// returns without training, `--status` shows it pending with what it waits for
// (sweep/status.h: branch_wait), and its Slurm task depends on its source's
// (sweep/slurm_submit.h). The source's files are only read: the branch copies the
// history up to its checkpoint into its own metrics.jsonl and writes its checkpoints in
// its own directory (run/run_start.h: open_run's branch_from), and the checkpoints it
// starts from are kept (train.ckpt_steps).
#pragma once

#include "sweep/grid.h"

#include <filesystem>

namespace xsagpt {

// The checkpoint branch `p` starts from: its source's at the branch's decay start.
std::filesystem::path branch_checkpoint(const Sweep& sweep, const SweepPoint& p);

// Whether point `p` can train now: true for a point that is no branch; for a branch, the
// checkpoint it starts from exists, or it has checkpoints of its own to continue from.
bool branch_ready(const Sweep& sweep, const SweepPoint& p);

}  // namespace xsagpt
