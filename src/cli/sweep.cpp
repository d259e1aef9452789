// `xsagpt sweep`: run every point of a grid (each named variant at every setting of
// the other keys) as a training run, restartably, then compare every variant with the
// baseline (summary.json, report.md, a table) and draw the figures.
#include "cli/commands.h"
#include "cli/options.h"
#include "dist/process_group.h"
#include "run/run_dir.h"
#include "run/run_paths.h"
#include "sweep/point_check.h"
#include "sweep/report.h"
#include "sweep/summary.h"
#include "train/memory_check.h"
#include "train/signals.h"
#include "train/trainer.h"
#include "util/atomic_file.h"
#include "util/device.h"
#include "util/dir_lock.h"
#include "util/paths.h"
#include "util/spawn.h"
#include "util/test_stop.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <map>

namespace xsagpt::cli {

namespace fs = std::filesystem;

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

// The dry run's memory check: each point's estimate (what `xsagpt info` prints) on the
// device it would train on, so a grid over sequence lengths or sizes shows which of its
// points cannot fit before one of them is started, hours into the sweep.
void print_memory(const Sweep& s, int64_t world) {
  std::cout << "memory, as each point would start here:\n";
  for (const auto& p : s.points) {
    const auto& t = p.config.train;
    std::string where, verdict;
    try {
      const auto device = resolve_device(t.device, "train.device");
      const auto bytes = device_memory(device);
      const auto m =
          check_memory(p.config, runtime_of(t, device.is_cuda()), world, device.is_cuda(), bytes, device.str());
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

void print_results(const json& summary) {
  auto num = [](const json& p, const char* k) {
    return p.value(k, json()).is_number() ? fmt::format("{:.4f}", p[k].get<double>()) : std::string("-");
  };
  std::cout << fmt::format("\n{:<48} {:>8} {:>10} {:>10}\n", "point", "status", "train", "val");
  for (const auto& p : summary["points"])
    std::cout << fmt::format("{:<48} {:>8} {:>10} {:>10}\n", p["name"].get<std::string>(),
                             p["status"].get<std::string>(), num(p, "final_train_loss"), num(p, "final_val_loss"));
  // Why each invalid point is left out of every comparison (sweep/point_check.h).
  for (const auto& p : summary["points"])
    if (p["status"] == "invalid")
      std::cout << fmt::format("note: {} is invalid, left out: {}\n", p["name"].get<std::string>(),
                               p["error"].get<std::string>());
  // Every variant against the baseline, paired by seed (sweep/report.h; also report.md).
  if (!summary["comparisons"].empty()) std::cout << comparison_table(summary);
}

// Draws the sweep's figures with scripts/view/plot.py, run without a shell (the paths
// go to it as they are, whatever characters they hold); its output goes to stderr.
// A missing Python or a failed plot is a warning, not an error. Returns success.
bool plot(const fs::path& dir) {
  auto root = project_root();
  if (!root) {
    spdlog::warn("plotting skipped: scripts/view/plot.py not found beside the program");
    return false;
  }
  auto python = *root / ".venv" / "bin" / "python";
  const std::vector<std::string> argv{fs::exists(python) ? python.string() : "python3",
                                      (*root / "scripts" / "view" / "plot.py").string(), dir.string()};
  std::string shown;  // the command as one could type it, for the warning
  for (const auto& a : argv) shown += (shown.empty() ? "" : " ") + shell_quote(a);
  const auto status = run_program(argv, /*stdout_to_stderr=*/true);
  if (status != 0)
    spdlog::warn("plotting failed ({}); run: {}",
                 status < 0 ? "could not start it" : "exit status " + std::to_string(status), shown);
  return status == 0;
}

}  // namespace

int sweep(int argc, char** argv) {
  ignore_broken_pipes();  // a console that goes away never kills a run (train/signals.h)
  cxxopts::Options opts(
      "xsagpt sweep",
      "Run a grid of training runs (named variants, e.g. sa, xsa, xsa-last3, xsa-gated, x seeds "
      "or learning rates), restartably, and write summary.json, summary.csv and report.md: every "
      "variant against the baseline, paired by seed (mean difference, 95% t interval, paired "
      "t-test p), also at the baseline's wall-clock time and token count (docs/sweeps-and-plots.md).");
  // clang-format off
  opts.add_options()
    ("c,config", "sweep file (see configs/sweeps/; variants-tiny.json compares six attention variants on CPU)", cxxopts::value<std::string>())
    ("dry-run", "print the grid, the resolved runs and each point's memory estimate on the device it would use (marking points that cannot fit), without training")
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
  auto sweep = load_sweep(args["config"].as<std::string>(), dist.world_size());
  if (dist.is_main()) print_points(sweep, dist.world_size());
  if (args.count("dry-run")) {
    if (dist.is_main()) print_memory(sweep, dist.world_size());
    return 0;
  }

  // One sweep process per sweep directory (util/dir_lock.h): a second one would run
  // the same points into each other's locks and write the same summary files.
  DirLock lock;
  {
    std::string busy;
    if (dist.is_main()) {
      fs::create_directories(sweep.dir);
      try {
        lock = DirLock::acquire(sweep.dir, "sweep", [&](const std::string& holder) {
          return fmt::format(
              "sweep directory {} is in use: {} runs a sweep in it (it holds {}). Wait for it to finish, or stop it "
              "and run the same command again to continue",
              sweep.dir.string(), holder, (sweep.dir / ".lock").string());
        });
      } catch (const DirBusy& e) {
        busy = e.what();
      }
    }
    if (dist.any(!busy.empty()))
      throw DirBusy(busy.empty() ? fmt::format("sweep directory {} is in use (see rank 0)", sweep.dir.string()) : busy);
  }
  const auto spec_file = sweep.dir / "sweep.json";
  // out_dir aside: a sweep copied or moved elsewhere, its out_dir edited, is the same sweep.
  auto placeless = [](json spec) {
    if (spec.is_object()) spec.erase("out_dir");
    return spec;
  };
  if (fs::exists(spec_file) && placeless(read_json_file(spec_file)) != placeless(sweep.spec) && !args.count("force"))
    throw ConfigError(
        fmt::format("{} was made from a different sweep file; use another out_dir, or --force to "
                    "continue with the new one",
                    sweep.dir.string()));
  if (dist.is_main()) {
    write_file_atomic(spec_file, sweep.spec.dump(2) + "\n");
    spdlog::info("watch it live: {}  (or --wandb PROJECT)", track_command(sweep.dir));
  }

  const bool force = args.count("force") > 0, retry = args.count("retry-failed") > 0;
  // A point whose directory was made with another resolved config (the sweep's set,
  // its base file or a default changed) is stale: refused, or with --force rerun.
  // Only out_dir may differ: a moved sweep's points continue where they are.
  std::vector<bool> stale(sweep.points.size(), false);
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    const auto foreign = foreign_run(sweep.points[i]);
    if (!foreign) continue;
    if (!force)
      throw ConfigError(
          fmt::format("{}: point {} was run with another config than the sweep now resolves: {}; "
                      "use another out_dir, or --force to run the changed points again",
                      sweep.dir.string(), sweep.points[i].name, *foreign));
    stale[i] = true;
  }

  std::vector<std::string> failed, busy, foreign;
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    const auto& p = sweep.points[i];
    const auto tag = fmt::format("[{}/{}] {}", i + 1, sweep.points.size(), p.name);
    // Checked again when the point is reached: a run trained into its directory by hand
    // since the sweep started is not this point's, finished or not, and is left as it
    // is (--force reruns only what was stale at the start). The trainer checks once
    // more under its lock (same_config), for a run that slips in after this.
    if (!stale[i]) {
      if (const auto why = foreign_run(p)) {
        if (dist.is_main()) spdlog::error("{}: refused, not run and not recorded as failed: {}", tag, *why);
        foreign.push_back(p.name);
        continue;
      }
    }
    if (!stale[i] && fs::exists(RunPaths(p.config.out_dir).done)) {
      if (dist.is_main()) {
        spdlog::info("{}: finished, skipping", tag);
        fs::remove(failure_file(p));  // a record of an earlier attempt says nothing about a finished point
      }
      continue;
    }
    if (!stale[i] && !retry) {
      if (const auto failure = point_failure(p)) {
        if (dist.is_main())
          spdlog::warn("{}: failed before ({}), skipping; --retry-failed runs it again", tag,
                       failure->value("error", json("unknown")).get<std::string>());
        failed.push_back(p.name);
        continue;
      }
    }
    if (dist.is_main()) spdlog::info("{}{}", tag, stale[i] ? ": its config changed, running it again" : "");
    if (dist.is_main()) fs::remove(failure_file(p));  // retried: its new outcome replaces the old record
    TrainResult result;
    stop_here_for_tests("sweep:point-checked");
    try {
      // A stale point starts over (--overwrite); any other continues what it has.
      result = train(p.config, stale[i] ? TrainOptions{"", true} : TrainOptions{"auto", false, true}, dist);
    } catch (const ForeignRun& e) {
      if (dist.is_main()) spdlog::error("{}: refused, not run and not recorded as failed: {}", tag, e.what());
      foreign.push_back(p.name);
      continue;
    } catch (const DirBusy& e) {
      // Another process (a trainer started by hand) owns the point: not this point's
      // failure, and nothing of it is touched.
      if (dist.is_main()) spdlog::warn("{}: skipped, not recorded as failed: {}", tag, e.what());
      busy.push_back(p.name);
      continue;
    } catch (const std::exception& e) {
      // One point's failure (a diverging learning rate, bad data, out of memory) is
      // that point's result: recorded, and the queue goes on.
      const std::string what = e.what();
      if (dist.is_main()) {
        spdlog::error("{}: failed: {}", tag, what);
        record_failure(p, what);
        write_summary(sweep);
      }
      failed.push_back(p.name);
      // On several ranks one rank's failure may leave the others waiting in a
      // collective: the sweep stops there rather than guess.
      if (dist.world_size() > 1) throw;
      continue;
    }
    if (dist.is_main()) {
      if (result.finished) fs::remove(failure_file(p));
      write_summary(sweep);
    }
    if (!result.finished) {
      if (dist.is_main()) spdlog::warn("sweep interrupted; run the same command again to continue");
      return 0;
    }
  }
  if (dist.is_main()) {
    write_summary(sweep);
    print_results(sweep_summary(sweep));
    std::cout << fmt::format("summary: {}\n", (sweep.dir / "summary.json").string());
    if (!args.count("no-plot") && plot(sweep.dir))
      std::cout << fmt::format("figures: {}\n", (sweep.dir / "plots").string());
    if (!failed.empty())
      spdlog::error(
          "{} of {} point(s) failed: {} (each reason in summary.json and its failed.json); "
          "--retry-failed runs them again",
          failed.size(), sweep.points.size(), fmt::join(failed, "; "));
    if (!busy.empty())
      spdlog::error(
          "{} of {} point(s) were in use by another process and did not run: {}; run the sweep again once "
          "they are free",
          busy.size(), sweep.points.size(), fmt::join(busy, "; "));
  }
  if (dist.is_main() && !foreign.empty())
    spdlog::error(
        "{} of {} point(s) hold a run of another config in their directory and did not run: {}; move that run "
        "away (or use another out_dir) and run the sweep again",
        foreign.size(), sweep.points.size(), fmt::join(foreign, "; "));
  return failed.empty() && busy.empty() && foreign.empty() ? 0 : 1;
}

}  // namespace xsagpt::cli
