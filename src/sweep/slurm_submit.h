// Sweeps on Slurm, `xsagpt sweep --slurm [--submit]`: the sweep's points that are neither
// done nor already queued, as job arrays by shape (sweep/slurm_plan.h), their batch
// scripts written under OUT/slurm/ (sweep/slurm_scripts.h) with the summary job's, and
// the sbatch commands printed or, with submit, run: the arrays first, then the summary
// job depending on them (afterany), printing every job id. The same command after every
// point has finished submits nothing and says so. Every refusal (no sbatch or squeue on
// the PATH, a rank count or time limit the points cannot run with) comes before the
// first job is submitted.
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

// Returns 0, or throws ConfigError naming what is refused.
int run_slurm(const Sweep& sweep, const std::string& sweep_file, const SlurmRunOptions& opts,
              const MeasureStep& measure);

}  // namespace xsagpt
