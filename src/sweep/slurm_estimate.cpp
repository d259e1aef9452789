// The dry run's cost on the cluster (see slurm_estimate.h).
#include "sweep/slurm_estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <limits>

namespace xsagpt {

double packed_wall_seconds(std::vector<PackedTask> tasks, int64_t cluster_nodes, const std::vector<int64_t>& limits) {
  std::vector<size_t> order(tasks.size());  // longest first
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tasks[a].seconds > tasks[b].seconds; });
  struct Running {
    double end;
    size_t task;
  };
  std::vector<Running> running;
  std::vector<int64_t> per_array(limits.size(), 0);
  std::vector<bool> started(tasks.size(), false), ended(tasks.size(), false);
  int64_t free = cluster_nodes;
  double now = 0, wall = 0;
  size_t left = tasks.size();
  while (left > 0) {
    for (const size_t i : order) {
      const auto& t = tasks[i];
      const bool under_limit = limits.at(t.array) == 0 || per_array[t.array] < limits[t.array];
      if (started[i] || t.nodes > free || !under_limit || (t.after && !ended[*t.after])) continue;
      started[i] = true;
      --left;
      free -= t.nodes;
      ++per_array[t.array];
      running.push_back({now + t.seconds, i});
      wall = std::max(wall, now + t.seconds);
    }
    if (left == 0 || running.empty()) break;  // empty: a task larger than the cluster (refused when read)
    const auto first = std::min_element(running.begin(), running.end(),
                                        [](const Running& a, const Running& b) { return a.end < b.end; });
    now = first->end;
    free += tasks[first->task].nodes;
    --per_array[tasks[first->task].array];
    ended[first->task] = true;
    running.erase(first);
  }
  return wall;
}

namespace {

bool any_gpu(const std::vector<SlurmArray>& arrays) {
  return std::any_of(arrays.begin(), arrays.end(), [](const SlurmArray& a) { return a.settings.gpus_per_node > 0; });
}

// GPUs (or, where no job asks for one, CPUs) a job of these settings holds.
double held_devices(const SlurmSettings& s, bool gpus) {
  return static_cast<double>(gpus ? s.nodes * s.gpus_per_node : s.nodes * s.ntasks_per_node * s.cpus_per_task);
}

}  // namespace

void print_cluster_estimate(const Sweep& sweep, const std::vector<SlurmArray>& arrays, const LadderTimes* times) {
  int64_t cluster = sweep.slurm->cluster_nodes;
  for (const auto& a : arrays) cluster = std::max(cluster, a.settings.nodes);  // the default: one job's
  std::cout << fmt::format("slurm: {} job array(s) (one per shape), on a cluster of {} node(s){}:\n", arrays.size(),
                           cluster, sweep.slurm->cluster_nodes ? " (slurm.cluster_nodes)" : " (one job's; slurm.cluster_nodes sets it)");
  for (size_t k = 0; k < arrays.size(); ++k) {
    const auto& s = arrays[k].settings;
    std::cout << fmt::format("  array {}: {}, {} point(s); {} node(s) x {} task(s){}, time {}, signal {} s before{}\n",
                             k, arrays[k].label, arrays[k].points.size(), s.nodes, s.ntasks_per_node,
                             s.gpus_per_node ? fmt::format(", {} GPU(s) per node", s.gpus_per_node) : "", s.time,
                             s.signal_s, s.array_limit ? fmt::format(", at most {} at once", s.array_limit) : "");
  }
  if (!times || !sweep.ladder) {
    std::cout << "  (no time estimate: a ladder's dry run estimates each point's time)\n";
    return;
  }
  const bool gpus = any_gpu(arrays);
  const std::string unit = gpus ? "GPU-hours" : "CPU-hours";
  std::cout << fmt::format("  {:<48} {:>5} {:>6} {:>10} {:>10}\n", "point", "array", "ranks", "time", unit);
  std::vector<PackedTask> tasks;
  std::vector<size_t> task_of(sweep.points.size(), 0);  // a point's index in tasks, for its branches
  std::vector<int64_t> limits;
  double serial = 0, device_hours = 0, scratch_hours = 0;
  bool unknown = false;
  for (size_t k = 0; k < arrays.size(); ++k) {
    const auto& s = arrays[k].settings;
    limits.push_back(s.array_limit);
    for (const auto i : arrays[k].points) {
      const auto& p = sweep.points[i];
      const auto secs = ladder_point_seconds(sweep, p, *times, s.ranks());
      if (!secs) unknown = true;
      const double hours = secs ? *secs / 3600 * held_devices(s, gpus) : 0;
      serial += secs.value_or(0);
      device_hours += hours;
      if (secs)
        scratch_hours += *ladder_point_seconds(sweep, p, *times, s.ranks(), true) / 3600 * held_devices(s, gpus);
      task_of[i] = tasks.size();
      // Branches' arrays come after their sources' (sweep/slurm_plan.h).
      tasks.push_back(
          {secs.value_or(0), s.nodes, k, p.branch_of ? std::optional(task_of[*p.branch_of]) : std::nullopt});
      std::cout << fmt::format("  {:<48} {:>5} {:>6} {:>10} {:>10}\n", p.name, k, s.ranks(),
                               secs ? plan_duration(*secs) : "-", secs ? fmt::format("{:.1f}", hours) : "-");
    }
  }
  if (unknown) {
    std::cout << "  (no time estimate for every point: no wall time)\n";
    return;
  }
  const double wall = packed_wall_seconds(tasks, cluster, limits);
  std::cout << fmt::format(
      "on the cluster: {:.0f} {}; about {} with the arrays side by side on {} node(s) (longest point first), "
      "against {} with one job after another\n",
      device_hours, unit, plan_duration(wall), cluster, plan_duration(serial));
  if (scratch_hours > device_hours)  // a ladder's data ratios branched off one run per rung (sweep/branch.h)
    std::cout << fmt::format("  each data ratio its own run from scratch instead of a branch: {:.0f} {}\n",
                             scratch_hours, unit);
}

}  // namespace xsagpt
