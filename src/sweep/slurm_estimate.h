// Sweeps on Slurm, the dry run's part: what the sweep costs on the cluster its "slurm"
// section describes. Each point's time at its job's rank count and its GPU-hours, the
// arrays, and the sweep's wall time when the arrays run side by side on the cluster's
// nodes (the longest point first, each array at most array_limit tasks at once) beside
// the serial total (one job after another): the number a user reads before asking for
// the allocation.
#pragma once

#include "sweep/ladder_plan.h"
#include "sweep/slurm_plan.h"

#include <optional>
#include <vector>

namespace xsagpt {

// One point to place: how long it runs, on how many nodes, in which array, and for a
// branch (sweep/branch.h) the task (its index in the list) it starts after.
struct PackedTask {
  double seconds = 0;
  int64_t nodes = 1;
  size_t array = 0;
  std::optional<size_t> after = std::nullopt;
};

// The wall time of running `tasks` on `cluster_nodes` nodes, longest first: at each
// moment every waiting task that fits on the free nodes (and under its array's limit,
// 0 = none, and after the task it waits for ended) starts, longest first. Every task's
// nodes must be at most cluster_nodes.
double packed_wall_seconds(std::vector<PackedTask> tasks, int64_t cluster_nodes, const std::vector<int64_t>& limits);

// Prints the arrays and, where `times` estimates the points (a ladder's dry run), each
// point's time and GPU-hours (CPU-hours where no job asks for a GPU), the serial total
// and the side-by-side wall time.
void print_cluster_estimate(const Sweep& sweep, const std::vector<SlurmArray>& arrays, const LadderTimes* times);

}  // namespace xsagpt
