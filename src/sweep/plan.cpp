// Sweeps, the plan: the grid, the resolved runs and, for the dry run, each point's
// memory estimate and a ladder's sizes and time (see sweep/plan.h).
#include "sweep/plan.h"

#include "sweep/slurm_estimate.h"
#include "sweep/ladder_plan.h"
#include "sweep/slurm_plan.h"
#include "train/memory_check.h"
#include "train/run_check.h"
#include "util/device.h"

#include <fmt/format.h>

#include <iostream>

namespace xsagpt {

namespace {

void print_points(const Sweep& s, int64_t world) {
  std::cout << fmt::format("sweep {}: {} point(s) over {}\n", s.dir.string(), s.points.size(), json(s.keys).dump());
  for (const auto& p : s.points) {
    const auto& t = p.config.train;
    std::cout << fmt::format("  {:<48} attention={} lr={:g} seq_len={} micro_batch={} accumulation={} steps={}\n",
                             p.name, p.config.model.attention, t.lr, t.seq_len, t.micro_batch,
                             p.config.accumulation_steps(world), t.max_steps);
  }
}

// The dry run's checks: each point's estimate (what `xsagpt info` prints) on the
// device it would train on, so a grid over sequence lengths or sizes shows which of its
// points cannot fit before one of them is started, hours into the sweep; and first
// what train refuses at a point's start whatever the memory (train/run_check.h: its
// kernels against its model), named as train names it.
void print_memory(const Sweep& s, int64_t world) {
  std::cout << "memory, as each point would start here:\n";
  for (const auto& p : s.points) {
    const auto& t = p.config.train;
    std::string where, verdict;
    try {
      const auto device = resolve_device(t.device, "train.device");
      const auto rt = runtime_of(t, device.is_cuda());
      check_runnable(p.config, rt, device);  // what train would refuse at the point's start
      const auto bytes = device_memory(device);
      const auto m = check_memory(p.config, rt, world, device.is_cuda(), bytes, device.str());
      where = fmt::format("{:.2f} GiB", m.estimate.total() / (1024.0 * 1024 * 1024));
      if (!bytes) {
        verdict = "(device memory unknown)";
      } else {
        where += fmt::format(" of {:.1f} GiB on {}", *bytes / (1024.0 * 1024 * 1024), device.str());
        verdict = m.refusal   ? "CANNOT FIT: weights, gradients and optimizer state alone are larger"
                  : m.warning ? "MAY NOT FIT: the estimate is above the device's"
                              : "fits";
      }
    } catch (const ConfigError& e) {
      where = "-";
      verdict = e.what();
    }
    std::cout << fmt::format("  {:<48} {}  {}\n", p.name, where, verdict);
  }
}

// With a "slurm" section: the cluster's cost, and what `--slurm` would refuse.
void print_slurm_plan(const Sweep& sweep, const std::string& sweep_file, const LadderTimes* times) {
  const auto arrays = slurm_arrays(sweep);
  print_cluster_estimate(sweep, arrays, times);
  try {
    check_slurm_arrays(sweep, sweep_file, arrays, times);
  } catch (const ConfigError& e) {
    std::cout << "slurm: --slurm would refuse: " << e.what() << "\n";
  }
}

}  // namespace

void print_sweep_plan(const Sweep& sweep, const std::string& sweep_file, int64_t world_size, bool memory,
                      const MeasureStep& measure) {
  print_points(sweep, world_size);
  if (sweep.ladder) print_ladder_rungs(sweep);
  if (memory) print_memory(sweep, world_size);
  std::optional<LadderTimes> times;
  if (memory && sweep.ladder) times = print_ladder_estimate(sweep, world_size, measure);
  if (memory && sweep.slurm) print_slurm_plan(sweep, sweep_file, times ? &*times : nullptr);
}

}  // namespace xsagpt
