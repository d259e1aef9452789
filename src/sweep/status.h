// Sweeps, where each point stands, read from the sweep directory alone (its points'
// run directories and their locks, sweep/point_lock.h) without writing anything but the
// lock clock's probe file, removed at once, so
// any process on any machine sharing the directory may ask while others train:
// `xsagpt sweep --status`, and the points `--summarize` names as left out. On Slurm,
// --status adds each point's requeues (sweep/slurm_requeue.h) and, where squeue
// answers, its task in the queue with the reason it waits (sweep/slurm_queue.h).
#pragma once

#include "sweep/grid.h"
#include "sweep/point_check.h"
#include "sweep/point_lock.h"

#include <optional>
#include <string>

namespace xsagpt {

// Where `p` stands (PointState, sweep/point_check.h): ended_state where it has ended,
// otherwise running while a live process holds its lock, pending if not.
// `clock`: what lock files are aged against (sweep_lock_clock).
PointState point_state(const Sweep& sweep, const SweepPoint& p, const PointLockTiming& timing,
                       const LockClock& clock);

// The clock a sweep's point locks are aged against: a probe in its .locks folder.
LockClock sweep_lock_clock(const Sweep& sweep);

// Why branch `p` (sweep/branch.h) cannot train yet, naming the checkpoint it waits for
// and where its source stands (running, pending, failed: point_state); nullopt when it
// can (branch_ready). `source_live` (when given) says whether a live process holds the
// source, so that the checkpoint may yet come.
std::optional<std::string> branch_wait(const Sweep& sweep, const SweepPoint& p, bool* source_live = nullptr);

// One line per point (its index, name, state and detail), then the totals. Returns 0.
int print_sweep_status(const Sweep& sweep);

}  // namespace xsagpt
