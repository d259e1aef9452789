// Sweeps, the "slurm" section: how each point runs as a Slurm job (`xsagpt sweep
// --slurm`, sweep/slurm_submit.h), read and checked when the sweep file is, so that a
// misspelt key is refused by name before any script is written or job submitted.
//
// Its keys are declared in sweep/sweep_file.h (SlurmSection, SlurmSettings), with
// their defaults and help; docs/cluster.md's table is printed from them. Here the
// values are checked: a time limit sbatch reads, counts in range, names without spaces
// or quotes, extra lines that are options.
//
// A ladder rung may override any of them but cluster_nodes with its own "slurm" object
// ({"preset": "paper-2.7b", "slurm": {"nodes": 2}}): a larger rung needs more nodes or
// time. Points whose settings are equal (a shape) share one job array.
#pragma once

#include "sweep/sweep_file.h"

#include <optional>
#include <string>
#include <vector>

namespace xsagpt {

struct SlurmSpec {
  SlurmSettings base;
  std::vector<SlurmSettings> rungs;  // each ladder rung's, its overrides applied; empty without a ladder
  int64_t cluster_nodes = 0;         // the dry run's cluster; 0: one job's nodes (the most of any shape)
  // The settings the point of this rung (-1 without a ladder) runs with.
  const SlurmSettings& of_rung(int rung) const { return rung < 0 ? base : rungs.at(static_cast<size_t>(rung)); }
};

// Reads the sweep file's "slurm" section (nullopt without one) and each ladder rung's
// own. `path` names the file in refusals.
std::optional<SlurmSpec> read_slurm(const SweepFileSection& file, const std::string& path);

// A time limit as sbatch reads one ("M", "M:S", "H:M:S", "D-H", "D-H:M", "D-H:M:S") in
// seconds; nullopt when it is none of them.
std::optional<int64_t> slurm_time_seconds(const std::string& text);

}  // namespace xsagpt
