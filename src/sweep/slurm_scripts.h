// Sweeps on Slurm, the batch scripts `xsagpt sweep --slurm` writes under OUT/slurm/: one
// per job array (a shape's points, one task per point, its task id the point's index)
// and one for the summary job. Each task runs its point under srun, so that the
// signal the job asks for before its time limit (--signal without "B:", which would
// reach only the batch shell) reaches the trainer, which checkpoints and exits 3; the
// task then requeues itself by its own id, <array job>_<task> (the array's id alone
// would requeue every task), since Slurm's --requeue does nothing at a time limit. A
// preemption's SIGTERM ends the trainer the same way.
#pragma once

#include "sweep/slurm_spec.h"

#include <string>
#include <vector>

namespace xsagpt {

// What every script of one sweep shares.
struct SlurmScriptContext {
  std::string binary;      // the xsagpt that runs the points (absolute)
  std::string sweep_file;  // absolute
  std::string workdir;     // where relative paths in the sweep and run configs are read from
  std::string log_dir;     // the jobs' output files
  std::string job_name;    // every array's; the summary job's is job_name + "-summary"
  bool retry_failed = false;
  bool plot = true;
};

// Refuses, naming it, a value of `ctx` (or a label) that no batch script can carry:
// one holding a control character or a backslash. Called before anything is written.
void check_slurm_script_values(const SlurmScriptContext& ctx, const std::vector<std::string>& labels);

// The job name of a sweep's arrays: "xsagpt-<out_dir's last part>-<hash of its absolute
// path>", so that squeue finds this sweep's tasks and no other's.
std::string slurm_job_name(const std::string& sweep_dir_absolute);

// Task ids as sbatch --array lists them: "1,3,6".
std::string slurm_task_list(const std::vector<size_t>& tasks);

// The array script for these task ids (points), with the array's settings.
std::string slurm_array_script(const SlurmSettings& s, const std::vector<size_t>& tasks, const std::string& label,
                               const SlurmScriptContext& ctx);

// The summary job's script: `xsagpt sweep --summarize` with the base settings' account,
// partition, qos and time, on one task.
std::string slurm_summary_script(const SlurmSettings& base, const SlurmScriptContext& ctx);

}  // namespace xsagpt
