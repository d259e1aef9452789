// Sweeps, the "slurm" section: how each point runs as a Slurm job (`xsagpt sweep
// --slurm`, sweep/slurm_submit.h), read and checked when the sweep file is, so that a
// misspelt key is refused by name before any script is written or job submitted.
//
//   "slurm": {
//     "time": "2-00:00:00",   a job's time limit, as sbatch's --time reads it (required)
//     "partition", "account", "qos": strings, passed on when given
//     "nodes": 1, "ntasks_per_node": 8, "gpus_per_node": 8, "cpus_per_task": 12
//                             one point's job: its ranks are nodes x ntasks_per_node
//     "array_limit": 4        at most this many tasks of one array at once (sbatch's %K)
//     "signal_s": 120         USR2 this many seconds before the time limit: the trainer
//                             checkpoints and the task requeues itself
//     "requeue_limit": 3      how many times in a row a point may requeue itself without a
//                             newer checkpoint; past it, it stops and is marked as needing
//                             attention (sweep/slurm_requeue.h)
//     "extra": ["--constraint=h100"]   more #SBATCH lines, as written; none may set an option
//                             the scripts set themselves (--job-name, --array, --time, ...)
//     "cluster_nodes": 8      the nodes the dry run packs the arrays on (default: one job's)
//   }
// A ladder rung may override any of them but cluster_nodes with its own "slurm" object
// ({"preset": "paper-2.7b", "slurm": {"nodes": 2}}): a larger rung needs more nodes or
// time. Points whose settings are equal (a shape) share one job array.
#pragma once

#include "config/run_config.h"

#include <optional>
#include <string>
#include <vector>

namespace xsagpt {

struct SlurmSettings {
  std::string time, partition, account, qos;
  int64_t nodes = 1, ntasks_per_node = 1, gpus_per_node = 0, cpus_per_task = 1;
  int64_t array_limit = 0;  // 0: no throttle
  int64_t signal_s = 120;
  int64_t requeue_limit = 3;
  std::vector<std::string> extra;
  int64_t time_s = 0;  // `time` in seconds
  int64_t ranks() const { return nodes * ntasks_per_node; }
  bool operator==(const SlurmSettings&) const = default;
};

struct SlurmSpec {
  SlurmSettings base;
  std::vector<SlurmSettings> rungs;  // each ladder rung's, its overrides applied; empty without a ladder
  int64_t cluster_nodes = 0;         // the dry run's cluster; 0: one job's nodes (the most of any shape)
  // The settings the point of this rung (-1 without a ladder) runs with.
  const SlurmSettings& of_rung(int rung) const { return rung < 0 ? base : rungs.at(static_cast<size_t>(rung)); }
};

// Reads the sweep file's "slurm" section (nullopt without one) and each ladder rung's
// own. `path` names the file in refusals.
std::optional<SlurmSpec> read_slurm(const json& spec, const std::string& path);

// A time limit as sbatch reads one ("M", "M:S", "H:M:S", "D-H", "D-H:M", "D-H:M:S") in
// seconds; nullopt when it is none of them.
std::optional<int64_t> slurm_time_seconds(const std::string& text);

}  // namespace xsagpt
