// Sweeps on Slurm, the plan: the sweep's points grouped into job arrays, one per shape
// (points whose Slurm settings are equal: nodes, ranks, time...), and the checks that
// refuse a plan by name before any script is written or job submitted: each array's
// rank count against its points' batches, its points resolved at that rank count as
// the one-process summary reads them, and its time limit against the time between
// checkpoints (from the dry run's estimate).
#pragma once

#include "sweep/grid.h"
#include "sweep/ladder_plan.h"
#include "sweep/slurm_spec.h"

#include <optional>
#include <string>
#include <vector>

namespace xsagpt {

struct SlurmArray {
  SlurmSettings settings;
  std::vector<size_t> points;  // indices in the dry run's order: the array's task ids
  std::string label;           // what its points have in common, for messages: "rung d2", "every point"
  std::optional<size_t> after;  // branches (sweep/branch.h): the point whose task they start after
};

// The sweep's points by shape, in the order each shape first appears; branches apart,
// an array for the branches of each source point, after the others. The sweep has a
// "slurm" section.
std::vector<SlurmArray> slurm_arrays(const Sweep& sweep);

// Refuses, naming the array and the point: a rank count the point's batch does not
// allow (the sweep file resolved at that count, as the job's `xsagpt sweep` does), a
// point that resolves to another run at that count than in one process (--summarize
// would not recognise what the job trained), and, where `times` estimates it, a time
// limit (less the signal's lead) shorter than the time between the point's checkpoints.
void check_slurm_arrays(const Sweep& sweep, const std::string& sweep_file, const std::vector<SlurmArray>& arrays,
                        const LadderTimes* times);

}  // namespace xsagpt
