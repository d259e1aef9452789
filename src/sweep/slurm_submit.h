// Sweeps on Slurm, `xsagpt sweep --slurm [--submit]`: the sweep's points that are neither
// done nor already queued, as job arrays by shape (sweep/slurm_plan.h), their batch
// scripts written under OUT/slurm/ (sweep/slurm_scripts.h) with the summary job's, and
// the sbatch commands printed or, with submit, run: the arrays first, then the summary
// job depending on them (afterany), printing every job id. The same command after every
// point has finished submits nothing and says so. Every refusal of ours (no sbatch,
// squeue or scancel on the PATH, a rank count or time limit the points cannot run with, a
// path no script can carry) comes before the first job is submitted; a refusal by sbatch
// itself after the first (a later array's partition or node count) cancels the arrays
// already submitted, so that none stays queued without its summary job.
#pragma once

#include "sweep/grid.h"
#include "sweep/ladder_plan.h"

#include <string>

namespace xsagpt {

struct SlurmRunOptions {
  bool submit = false;        // submit the scripts (otherwise write them and print the commands)
  bool retry_failed = false;  // submit failed points too, their tasks running them again
  bool plot = true;           // the summary job draws the figures
};

// Returns 0, or throws ConfigError naming what is refused (nothing of the sweep then
// queued). Returns 1 when sbatch refused part of a submission and the arrays queued
// before it could not be cancelled; the message names them.
int run_slurm(const Sweep& sweep, const std::string& sweep_file, const SlurmRunOptions& opts,
              const MeasureStep& measure);

}  // namespace xsagpt
