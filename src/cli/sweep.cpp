// `xsagpt sweep`: run every point of a grid (each named variant at every setting of
// the other keys) as a training run, restartably, then compare every variant with the
// baseline (summary.json, report.md, a table) and draw the figures; or one point of it
// (--point), where the sweep stands (--status), its summary so far (--summarize), or its
// points as Slurm job arrays (--slurm, --submit).
// This file reads the options; sweep/run.h runs the points.
#include "bench/block_bench.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "distributed/process_group.h"
#include "sweep/ladder_tuning.h"
#include "sweep/plan.h"
#include "sweep/results.h"
#include "sweep/run.h"
#include "sweep/slurm_requeue.h"
#include "sweep/slurm_submit.h"
#include "sweep/status.h"
#include "train/signals.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

namespace xsagpt::cli {

namespace {

// --point K or --point-from-env VAR, resolved against the sweep's points.
std::optional<size_t> chosen_point(const cxxopts::ParseResult& args, const Sweep& sweep) {
  if (args.count("point") && args.count("point-from-env"))
    throw ConfigError("--point and --point-from-env: give one, not both");
  if (args.count("point")) return find_point(sweep, args["point"].as<std::string>(), "--point");
  if (!args.count("point-from-env")) return std::nullopt;
  const auto var = args["point-from-env"].as<std::string>();
  const char* value = std::getenv(var.c_str());
  const std::string where = fmt::format("--point-from-env {}", var);
  if (!value) throw ConfigError(fmt::format("{}: the environment variable {} is not set", where, var));
  const std::string text = value;
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    throw ConfigError(fmt::format("{}: expected a point index (0 to {}) in {}, got \"{}\"", where,
                                  sweep.points.size() - 1, var, text));
  return find_point(sweep, text, fmt::format("{} ({}={})", where, var, text));
}

}  // namespace

int sweep(int argc, char** argv) {
  ignore_broken_pipes();  // a console that goes away never kills a run (train/signals.h)
  cxxopts::Options opts(
      "xsagpt sweep",
      "Run a grid of training runs (named variants, e.g. sa, xsa, xsa-last3, xsa-gated, x seeds "
      "or learning rates), restartably, and write summary.json, summary.csv and report.md: every "
      "variant against the baseline, paired by seed (mean difference, 95% t interval, paired "
      "t-test p and p Holm-adjusted across the variants; beside them, from 3 seeds, the baseline's own sd over "
      "seeds), also at the baseline's wall-clock time and token count (docs/sweeps-and-plots.md). "
      "A \"ladder\" section runs the variants at several sizes (depths by a width rule, or model presets), "
      "each with its token budget and rate by stated rules, and fits each variant's loss against compute: the "
      "compute multiplier per size with intervals, its trend and extrapolation (docs/ladder-study.md; "
      "configs/sweeps/ladder-tiny.json). Exit status: 0 every point asked for is done; 1 a point failed, is "
      "invalid, is held by another live process or was taken over by one; 3 interrupted by a signal (SIGTERM, "
      "SIGINT, SIGHUP, SIGUSR2; also during start-up), continued by the same command. With a \"slurm\" section, --slurm writes each point as a Slurm array task "
      "(preemptible: it checkpoints on the signal before its time limit and requeues itself) with a summary job, "
      "and --submit submits the points not yet done (docs/cluster.md).");
  // clang-format off
  opts.add_options()
    ("c,config", "sweep file (see configs/sweeps/; variants-tiny.json compares attention variants on CPU)", cxxopts::value<std::string>())
    ("dry-run", "print the grid, the resolved runs and each point's memory estimate on the device it would use (marking points that cannot fit), without training; "
                "a ladder adds each point's parameters, tokens, FLOPs and estimated time, the total, and what the estimate rests on")
    ("force", "continue in a sweep directory made from a different sweep file; points whose resolved run "
              "config changed are run again from the start (their old results are discarded)")
    ("retry-failed", "run the points that failed before again (without it a rerun leaves them failed)")
    ("point", "train only this point: its index in --dry-run's order (from 0) or its name; any number of "
              "processes (whole sweeps and points) may share one sweep directory, each point trained by one", cxxopts::value<std::string>())
    ("point-from-env", "train only the point whose index is in this environment variable "
                       "(SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX)", cxxopts::value<std::string>())
    ("status", "print where each point stands (done; running, with host, job, step and heartbeat; pending; "
               "failed, with why; invalid) and the totals; on Slurm also how often each point requeued itself "
               "and, where squeue answers, its task's state and the reason it waits; writes nothing")
    ("summarize", "write summary.json, report.md and the figures from the points that are done, naming every "
                  "point that is not; exit 1 while any is not done")
    ("slurm", "write Slurm batch scripts under OUT/slurm/ for the points not yet done (job arrays by the sweep "
              "file's \"slurm\" section, a summary job after them) and print the sbatch commands; --dry-run with "
              "the section prints each point's GPU-hours and the wall time with the arrays side by side")
    ("submit", "with --slurm: submit the scripts (only points neither done nor queued) and print the job ids; "
               "a refusal by sbatch part-way cancels what was submitted (exit 2; 1 if it cannot)")
    ("requeue", "with --point/--point-from-env: count a requeue of that point by its Slurm job (the batch scripts "
                "ask before a task requeues itself); exit 0 while it may, 1 once it has requeued itself more than "
                "slurm.requeue_limit times in a row without a newer checkpoint, the point then failed as needing attention")
    ("no-plot", "do not draw figures at the end");
  // clang-format on
  const auto parsed = parse_command(opts, argc, argv);
  if (!parsed) return 0;
  const auto& args = *parsed;
  if (!args.count("config")) throw ConfigError("--config: required (e.g. --config configs/sweeps/cpu-lr.json)");
  if (args.count("requeue")) {
    // Asked by a batch script, one process outside srun's steps: the sweep as one process
    // resolves it, which --slurm has checked is the run its jobs train at their rank count.
    const auto sweep = load_tuned_sweep(args["config"].as<std::string>(), 1);
    const auto point = chosen_point(args, sweep);
    if (!point || args.count("dry-run") || args.count("status") || args.count("summarize") || args.count("slurm"))
      throw ConfigError("--requeue: counts one point's requeue; give it with --point or --point-from-env alone");
    return requeue_point(sweep, *point);
  }
  auto dist_ctx = make_dist_context();  // single-process unless launched by torchrun/srun
  DistContext& dist = *dist_ctx;
  const auto sweep = load_tuned_sweep(args["config"].as<std::string>(), dist.world_size());
  const bool dry_run = args.count("dry-run") > 0;
  const auto point = chosen_point(args, sweep);
  const bool status = args.count("status") > 0, summarize = args.count("summarize") > 0;
  const bool slurm = args.count("slurm") > 0;
  if (args.count("submit") && !slurm) throw ConfigError("--submit: submits what --slurm writes; give both");
  if (dry_run + status + summarize + point.has_value() + slurm > 1)
    throw ConfigError("--dry-run, --status, --summarize, --slurm and --point/--point-from-env: give one at most");
  // Only training honours a stop signal with a checkpoint (train/signals.h, from main()); the
  // other modes end on one as any program does, one caught during start-up included.
  if (status || summarize || slurm || dry_run) stop_on_signals_now();
  if (status) return dist.is_main() ? print_sweep_status(sweep) : 0;
  if (summarize) return dist.is_main() ? summarize_sweep(sweep, args.count("no-plot") == 0) : 0;
  if (slurm) {
    if (dist.world_size() > 1) throw ConfigError("--slurm: run it in one process, not under srun or torchrun");
    const SlurmRunOptions o{args.count("submit") > 0, args.count("retry-failed") > 0, args.count("no-plot") == 0};
    return run_slurm(sweep, args["config"].as<std::string>(), o, step_flop_rate);
  }
  // The dry run times a ladder's steps with bench's training step where the ladder names no
  // estimate (sweep/ladder_plan.h).
  if (dist.is_main() && !point) print_sweep_plan(sweep, args["config"].as<std::string>(), dist.world_size(), dry_run, step_flop_rate);
  if (dry_run) return 0;
  SweepRunOptions run;
  run.force = args.count("force") > 0;
  run.retry_failed = args.count("retry-failed") > 0;
  run.plot = args.count("no-plot") == 0;
  run.watch_hint = track_command(sweep.dir);
  if (point) return run_sweep_point(sweep, *point, run, dist);
  int rc = run_sweep(sweep, run, dist);
  // A ladder that tunes at its smallest rungs (ladder.tune_rungs) learns the larger rungs'
  // rates from them: the sweep is loaded again and goes on while that adds points, and
  // waits while another process on the directory trains a tuning point. Each run covers
  // every point known, so the last one's status is the sweep's.
  const Sweep* last = &sweep;
  Sweep next;
  while (rc != kSweepInterrupted && !last->waiting.empty()) {
    const size_t known = last->points.size();
    next = load_tuned_sweep(args["config"].as<std::string>(), dist.world_size());
    last = &next;
    if (next.points.size() == known) {
      if (wait_for_tuning(next, dist)) continue;
      if (dist.any(stop_requested())) rc = kSweepInterrupted;
      break;
    }
    rc = run_sweep(next, run, dist);
  }
  if (dist.is_main())
    for (const auto& t : last->tuning)
      if (!t.lr_mult) spdlog::warn("{}: its larger rungs wait for its rate: {}", t.variant, t.waits);
  return rc;
}

}  // namespace xsagpt::cli
