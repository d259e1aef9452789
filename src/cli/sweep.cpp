// `xsagpt sweep`: run every point of a grid (each named variant at every setting of
// the other keys) as a training run, restartably, then compare every variant with the
// baseline (summary.json, report.md, a table) and draw the figures. This file reads the
// options; sweep/run.h runs the points.
#include "bench/block_bench.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "distributed/process_group.h"
#include "sweep/run.h"
#include "train/signals.h"

namespace xsagpt::cli {

int sweep(int argc, char** argv) {
  ignore_broken_pipes();  // a console that goes away never kills a run (train/signals.h)
  cxxopts::Options opts(
      "xsagpt sweep",
      "Run a grid of training runs (named variants, e.g. sa, xsa, xsa-last3, xsa-gated, x seeds "
      "or learning rates), restartably, and write summary.json, summary.csv and report.md: every "
      "variant against the baseline, paired by seed (mean difference, 95% t interval, paired "
      "t-test p), also at the baseline's wall-clock time and token count (docs/sweeps-and-plots.md). "
      "A \"ladder\" section runs the variants at several sizes (depths by a width rule, or model presets), "
      "each with its token budget and rate by stated rules, and fits each variant's loss against compute: the "
      "compute multiplier per size with intervals, its trend and extrapolation (docs/ladder-study.md; "
      "configs/sweeps/ladder-tiny.json).");
  // clang-format off
  opts.add_options()
    ("c,config", "sweep file (see configs/sweeps/; variants-tiny.json compares attention variants on CPU)", cxxopts::value<std::string>())
    ("dry-run", "print the grid, the resolved runs and each point's memory estimate on the device it would use (marking points that cannot fit), without training; "
                "a ladder adds each point's parameters, tokens, FLOPs and estimated time, the total, and what the estimate rests on")
    ("force", "continue in a sweep directory made from a different sweep file; points whose resolved run "
              "config changed are run again from the start (their old results are discarded)")
    ("retry-failed", "run the points that failed before again (without it a rerun leaves them failed)")
    ("no-plot", "do not draw figures at the end");
  // clang-format on
  const auto parsed = parse_command(opts, argc, argv);
  if (!parsed) return 0;
  const auto& args = *parsed;
  if (!args.count("config")) throw ConfigError("--config: required (e.g. --config configs/sweeps/cpu-lr.json)");
  auto dist_ctx = make_dist_context();  // single-process unless launched by torchrun/srun
  DistContext& dist = *dist_ctx;
  const auto sweep = load_sweep(args["config"].as<std::string>(), dist.world_size());
  const bool dry_run = args.count("dry-run") > 0;
  // The dry run times a ladder's steps with bench's training step where the ladder names no
  // estimate (sweep/ladder_plan.h).
  if (dist.is_main()) print_sweep_plan(sweep, dist.world_size(), dry_run, step_flop_rate);
  if (dry_run) return 0;
  SweepRunOptions run;
  run.force = args.count("force") > 0;
  run.retry_failed = args.count("retry-failed") > 0;
  run.plot = args.count("no-plot") == 0;
  run.watch_hint = track_command(sweep.dir);
  return run_sweep(sweep, run, dist);
}

}  // namespace xsagpt::cli
