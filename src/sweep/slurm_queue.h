// Sweeps on Slurm, what the queue says about a sweep's points: each array task of the
// sweep's job name that squeue lists (pending, running, requeued or held), by task id,
// which is its point's index, with Slurm's state and its reason for a task that waits.
// `--submit` leaves queued points alone; `--status` shows why each waits, since a task
// held after a failed launch or too many requeues waits forever unless someone acts.
#pragma once

#include "sweep/grid.h"

#include <map>
#include <string>

namespace xsagpt {

struct QueuedTask {
  std::string job;     // "123_4"
  std::string state;   // squeue's: PENDING, RUNNING, REQUEUED, REQUEUE_HOLD, ...
  std::string reason;  // squeue's %r: "Priority", "Resources", "JobHeldUser", "None", ...
  // "job 123_4 PENDING (Resources: waiting for nodes to free up)"
  std::string describe() const;
};

// squeue's lines "<task id>|<job id>|<state>|<reason>" read by task id; others skipped.
std::map<size_t, QueuedTask> parse_queued_tasks(const std::string& squeue_out);

// The tasks of the sweep's arrays in the queue now (squeue by the job name of its
// directory). Throws ConfigError naming squeue when it fails.
std::map<size_t, QueuedTask> queued_tasks(const Sweep& sweep);

// The job name every array of the sweep gets (sweep/slurm_scripts.h), from its directory.
std::string sweep_job_name(const Sweep& sweep);

}  // namespace xsagpt
