// Sweeps on Slurm, a point's own requeues, counted in its directory: a task that ends
// interrupted while its job still runs (the signal before its time limit) requeues itself
// and resumes from its checkpoint, and a point longer than a job's time limit finishes
// over several jobs that way. A point that gets nowhere (a start-up longer than the
// job's time, a node that fails every launch, a preemption before each first step)
// would requeue forever, so the batch script asks first (`xsagpt sweep --point-from-env
// SLURM_ARRAY_TASK_ID --requeue`), and the point answers from what it has counted:
//
//   OUT/<point>/requeues.json  {"requeues": 7, "stalled": 1, "step": 400, "jobs": [...],
//                               "needs_attention": false}
//     requeues  every requeue of the point by itself
//     stalled   the requeues in a row without a newer checkpoint than the one before
//     step      the newest checkpoint's step at the last requeue (-1: none)
//     jobs      the last few jobs that requeued it ("<array job>_<task>")
//
// A requeue whose point has a newer checkpoint than at its last one resets `stalled`. Past
// the point's slurm.requeue_limit (default 3) in a row, the point is not requeued: it is
// recorded as failed, its error starting "needs attention", so that --status, the summary
// and --submit name it, and --retry-failed submits it again, its count then starting over.
#pragma once

#include "sweep/grid.h"

#include <optional>
#include <string>

namespace xsagpt {

struct RequeueVerdict {
  bool requeue = false;
  std::string message;  // what the job's log says: the count, or why it stops
};

// Counts one requeue of point `p` of a sweep with a "slurm" section by job `job`, and says
// whether it may go back to the queue.
RequeueVerdict record_requeue(const Sweep& sweep, const SweepPoint& p, const std::string& job);

// `xsagpt sweep --point-from-env SLURM_ARRAY_TASK_ID --requeue`: records the requeue of
// point `index` by this process's job and logs the verdict. Returns 0 when the task may
// requeue itself, 1 when the point was marked instead. ConfigError without a "slurm" section.
int requeue_point(const Sweep& sweep, size_t index);

// "requeued itself 2 time(s), 1 in a row without a newer checkpoint", or nullopt before the first.
std::optional<std::string> requeue_summary(const SweepPoint& p);

}  // namespace xsagpt
